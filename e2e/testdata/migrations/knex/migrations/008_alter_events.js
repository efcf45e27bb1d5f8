// Alters events, which the end-to-end test caches through the proxy just
// before this step (after the rows of 007).
exports.up = async (knex) => {
  await knex.schema.alterTable('events', (t) => {
    t.string('source', 20).notNullable().defaultTo('web');
  });
  await knex.schema.alterTable('events', (t) => {
    t.string('kind', 80).notNullable().alter();
  });
  await knex.schema.alterTable('events', (t) => {
    t.renameColumn('level', 'severity');
  });
};

exports.down = async (knex) => {
  await knex.schema.alterTable('events', (t) => {
    t.renameColumn('severity', 'level');
  });
  await knex.schema.alterTable('events', (t) => {
    t.string('kind', 50).notNullable().alter();
  });
  await knex.schema.alterTable('events', (t) => {
    t.dropColumn('source');
  });
};
