// Connection from the environment, so the end-to-end test can point the same
// migrations at the proxy and at the backend.
module.exports = {
  client: 'mysql2',
  connection: {
    host: process.env.DB_HOST,
    port: Number(process.env.DB_PORT),
    user: process.env.DB_USER,
    password: process.env.DB_PASSWORD,
    database: process.env.DB_NAME,
  },
  pool: { min: 0, max: 2 },
  migrations: { directory: __dirname + '/migrations' },
};
