exports.up = async (knex) => {
  await knex('users').insert([
    { id: 1, email: 'ada@example.com', name: 'Ada' },
    { id: 2, email: 'bob@example.com', name: 'Bob' },
  ]);
  await knex('posts').insert([
    { id: 1, user_id: 1, title: 'First', slug: 'first', content: 'hello', score: 3 },
    { id: 2, user_id: 2, title: 'Second', slug: 'second', content: 'world', score: 5 },
  ]);
  await knex('comments').insert([
    { id: 1, post_id: 1, user_id: 2, body: 'nice' },
    { id: 2, post_id: 2, user_id: 1, body: 'thanks' },
  ]);
  await knex('events').insert([
    { id: 1, kind: 'signup', level: 1 },
    { id: 2, kind: 'post', level: 2 },
  ]);
};

exports.down = async (knex) => {
  await knex('events').del();
  await knex('comments').del();
  await knex('posts').del();
  await knex('users').del();
};
