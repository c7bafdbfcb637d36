// The reference queue of the queue benchmark's targets (BENCHMARKS.md): graphile-worker
// draining N no-op jobs on the same PostgreSQL, through its public API only.
// Usage: node bench.mjs <mode> [concurrency] [N]   (run.sh installs the package)
//   mode a : its defaults, concurrency only
//   mode b : local prefetch and batched completion: localQueue.size=500,
//            completeJobBatchDelay=0, failJobBatchDelay=0
// The clock runs from starting the worker until the database holds no job (with batched
// completion a task can finish before its completion is committed).
// Output: one line "RESULT mode=<..> jobs=<N> seconds=<s> jobs_per_s=<r> exec_seconds=<s>"
import pg from "pg";
import { Logger, makeWorkerUtils, run } from "graphile-worker";

const DATABASE_URL =
  process.env.DATABASE_URL || "postgres://lps:lps@127.0.0.1:5432/lps_bench_graphile";
const mode = process.argv[2] || "a";
const concurrency = Number(process.argv[3] || 8);
const N = Number(process.argv[4] || process.env.N || 20000);
const LQ_SIZE = Number(process.env.LQ_SIZE || 500);
const BATCH_DELAY = Number(process.env.BATCH_DELAY ?? 0);

const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`[${level}] ${message}`);
});

// Ensure database exists (connects to the maintenance DB only to CREATE DATABASE).
async function ensureDb() {
  const u = new URL(DATABASE_URL);
  const dbName = u.pathname.slice(1);
  const admin = new URL(DATABASE_URL);
  admin.pathname = "/postgres";
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  const r = await c.query("select 1 from pg_database where datname=$1", [dbName]);
  if (r.rowCount === 0) await c.query(`create database "${dbName}"`);
  await c.end();
}

async function main() {
  await ensureDb();
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  pool.on("error", (e) => console.error("[pool error]", e.message));
  pool.on("connect", (client) => client.on("error", (e) => console.error("[client error]", e.message)));
  // fresh schema each run (no bloat carried between runs)
  await pool.query("drop schema if exists graphile_worker cascade");

  const utils = await makeWorkerUtils({ pgPool: pool, logger });
  await utils.migrate();

  // bulk insert N no-op jobs (not timed): addJobs -> graphile_worker.add_jobs
  const CHUNK = 5000;
  for (let i = 0; i < N; i += CHUNK) {
    const specs = [];
    for (let j = i; j < Math.min(N, i + CHUNK); j++) {
      specs.push({ identifier: "noop", payload: {} });
    }
    await utils.addJobs(specs);
  }
  const {
    rows: [{ n: queued }],
  } = await pool.query("select count(*)::int as n from graphile_worker.jobs");
  if (queued !== N) throw new Error(`expected ${N} queued, got ${queued}`);
  await pool.query("vacuum analyze graphile_worker._private_jobs");

  let done = 0;
  let resolveExec;
  const execDone = new Promise((r) => (resolveExec = r));
  const taskList = {
    noop: async () => {
      if (++done === N) resolveExec();
    },
  };

  const opts = {
    connectionString: DATABASE_URL,
    concurrency,
    taskList,
    logger,
    noHandleSignals: true,
    crontab: "", // no cron
  };
  if (mode === "b") {
    opts.maxPoolSize = Math.max(10, concurrency + 2);
    opts.preset = {
      worker: {
        localQueue: { size: LQ_SIZE },
        completeJobBatchDelay: BATCH_DELAY,
        failJobBatchDelay: BATCH_DELAY,
      },
    };
  }

  const t0 = process.hrtime.bigint();
  const runner = await run(opts);
  await execDone;
  const tExec = Number(process.hrtime.bigint() - t0) / 1e9;
  // wait until the DB agrees all jobs are completed (deleted)
  for (;;) {
    const {
      rows: [{ n }],
    } = await pool.query("select count(*)::int as n from graphile_worker._private_jobs");
    if (n === 0) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  await runner.stop();
  await utils.release();
  await pool.end();

  console.log(
    `RESULT mode=${mode}${mode === "b" ? `(lq=${LQ_SIZE},delay=${BATCH_DELAY})` : ""}/c${concurrency} jobs=${N} seconds=${secs.toFixed(3)} jobs_per_s=${(N / secs).toFixed(0)} exec_seconds=${tExec.toFixed(3)} tasks_run=${done}`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
