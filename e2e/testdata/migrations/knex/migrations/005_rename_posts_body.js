exports.up = (knex) => knex.schema.alterTable('posts', (t) => t.renameColumn('body', 'content'));
exports.down = (knex) => knex.schema.alterTable('posts', (t) => t.renameColumn('content', 'body'));
