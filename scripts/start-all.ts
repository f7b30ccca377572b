/**
 * `npm start`: runs every product's server side by side on its embedded defaults (creatures :4000,
 * auth :4100, sandbox REST :8100 on loopback) and stops them all on SIGINT/SIGTERM. One product that
 * fails to start (e.g. the sandbox without root) does not stop the others. `SEED_PRODUCTS` (comma-separated)
 * narrows the set. Uses `concurrently` to supervise the processes and prefix their output.
 */
import concurrently from 'concurrently';

const products = (process.env.SEED_PRODUCTS ?? 'creatures,auth,sandbox').split(',').filter(Boolean);
const { result } = concurrently(
  products.map((name) => ({ command: `npm run --silent start:${name}`, name })),
  { prefix: 'name', restartTries: 0 },
);
result.then(
  () => process.exit(0),
  () => process.exit(1),
);
