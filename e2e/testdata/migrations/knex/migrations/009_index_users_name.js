// The step the test rolls back.
exports.up = (knex) => knex.schema.alterTable('users', (t) => t.index(['name'], 'users_name_idx'));
exports.down = (knex) => knex.schema.alterTable('users', (t) => t.dropIndex(['name'], 'users_name_idx'));
