exports.up = async (knex) => {
  await knex.schema.alterTable('posts', (t) => t.index(['score'], 'posts_score_idx'));
  await knex.schema.alterTable('events', (t) => t.index(['level'], 'events_level_idx'));
};
exports.down = async (knex) => {
  await knex.schema.alterTable('events', (t) => t.dropIndex(['level'], 'events_level_idx'));
  await knex.schema.alterTable('posts', (t) => t.dropIndex(['score'], 'posts_score_idx'));
};
