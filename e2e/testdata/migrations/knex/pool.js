// A mysql2 pool whose sessions the server ends when idle (wait_timeout):
// rounds of concurrent queries with idle gaps longer than the timeout. Exits
// non-zero on the first query error.
const mysql = require('mysql2/promise');

const waitTimeout = Number(process.env.WAIT_TIMEOUT || 2);
const rounds = Number(process.env.ROUNDS || 3);
const concurrency = 4; // as poolConcurrency in e2e/pool_test.go

async function main() {
  const pool = mysql.createPool({
    host: process.env.DB_HOST,
    port: Number(process.env.DB_PORT),
    user: process.env.DB_USER,
    password: process.env.DB_PASSWORD,
    database: process.env.DB_NAME,
    connectionLimit: concurrency,
    maxIdle: concurrency,
  });
  // Each new session gets the short timeout, as an application's pool
  // setup would.
  pool.pool.on('connection', (conn) => conn.query(`SET SESSION wait_timeout = ${waitTimeout}`));
  try {
    for (let round = 0; round < rounds; round++) {
      await Promise.all(Array.from({ length: concurrency }, async (_, i) => {
        const [rows] = await pool.query('SELECT ? + 1 AS n, CONNECTION_ID() AS id, @@wait_timeout AS wt, SLEEP(0.05)', [i]);
        if (process.env.VERBOSE) console.log(round, rows[0].id, rows[0].wt);
        if (rows[0].n !== i + 1) throw new Error(`round ${round}: got ${rows[0].n}, want ${i + 1}`);
      }));
      await new Promise((resolve) => setTimeout(resolve, (waitTimeout + 1) * 1000));
    }
  } finally {
    await pool.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
