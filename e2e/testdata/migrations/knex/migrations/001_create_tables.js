exports.up = async (knex) => {
  await knex.schema.createTable('users', (t) => {
    t.increments('id');
    t.string('email', 100).notNullable();
    t.string('name', 100);
  });
  await knex.schema.createTable('posts', (t) => {
    t.increments('id');
    t.integer('user_id').unsigned().notNullable().references('id').inTable('users');
    t.string('title', 200).notNullable();
    t.string('slug', 200).notNullable();
    t.text('body');
    t.integer('score').notNullable().defaultTo(0);
  });
  await knex.schema.createTable('comments', (t) => {
    t.increments('id');
    t.integer('post_id').unsigned().notNullable().references('id').inTable('posts');
    t.integer('user_id').unsigned().notNullable().references('id').inTable('users');
    t.text('body');
  });
  // No foreign keys: its indexes take the plain online path.
  await knex.schema.createTable('events', (t) => {
    t.increments('id');
    t.string('kind', 50).notNullable();
    t.integer('level').notNullable();
  });
};

exports.down = async (knex) => {
  await knex.schema.dropTable('events');
  await knex.schema.dropTable('comments');
  await knex.schema.dropTable('posts');
  await knex.schema.dropTable('users');
};
