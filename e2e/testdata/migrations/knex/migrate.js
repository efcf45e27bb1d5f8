// Applies every migration one step at a time (one batch each, as a team
// deploying them over time would), then rolls the last step back.
const knex = require('knex')(require('./knexfile'));

async function main() {
  for (;;) {
    const [, pending] = await knex.migrate.list();
    if (pending.length === 0) break;
    await knex.migrate.up();
  }
  await knex.migrate.down();
}

main()
  .then(() => knex.destroy())
  .catch(async (err) => {
    console.error(err);
    await knex.destroy();
    process.exit(1);
  });
