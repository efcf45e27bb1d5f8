exports.up = (knex) => knex.schema.alterTable('posts', (t) => t.dropIndex(['title'], 'posts_title_idx'));
exports.down = (knex) => knex.schema.alterTable('posts', (t) => t.index(['title'], 'posts_title_idx'));
