exports.up = (knex) => knex.schema.alterTable('posts', (t) => t.unique(['slug'], { indexName: 'posts_slug_unique' }));
exports.down = (knex) => knex.schema.alterTable('posts', (t) => t.dropUnique(['slug'], 'posts_slug_unique'));
