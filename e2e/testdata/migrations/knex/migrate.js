// Applies every migration one step at a time (one batch each, as a team
// deploying them over time would), then rolls the last step back. With
// MIGRATE_UNTIL=file it stops after that migration, and rolls nothing back.
const knex = require('knex')(require('./knexfile'));

async function main() {
  const last = process.env.MIGRATE_UNTIL;
  for (;;) {
    const [, pending] = await knex.migrate.list();
    if (pending.length === 0) break;
    const [, applied] = await knex.migrate.up();
    if (last && applied.includes(last)) return;
  }
  if (last) throw new Error(`no migration ${last} to apply`);
  await knex.migrate.down();
}

main()
  .then(() => knex.destroy())
  .catch(async (err) => {
    console.error(err);
    await knex.destroy();
    process.exit(1);
  });
