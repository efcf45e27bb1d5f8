exports.up = async (knex) => {
  await knex.schema.alterTable('posts', (t) => t.index(['title'], 'posts_title_idx'));
  await knex.schema.alterTable('events', (t) => t.index(['kind'], 'events_kind_idx'));
};
exports.down = async (knex) => {
  await knex.schema.alterTable('events', (t) => t.dropIndex(['kind'], 'events_kind_idx'));
  await knex.schema.alterTable('posts', (t) => t.dropIndex(['title'], 'posts_title_idx'));
};
