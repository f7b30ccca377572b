/**
 * `npm start`: runs every product's server side by side on its embedded defaults and stops them
 * all on SIGINT/SIGTERM. Uses `concurrently` to supervise the processes and prefix their output.
 */
import concurrently from 'concurrently';

const products = (process.env.SEED_PRODUCTS ?? 'creatures,auth,sandbox').split(',').filter(Boolean);
const { result } = concurrently(
  products.map((name) => ({ command: `npm run --silent start:${name}`, name })),
  { killOthersOn: ['failure'], prefix: 'name', restartTries: 0 },
);
result.then(
  () => process.exit(0),
  () => process.exit(1),
);
