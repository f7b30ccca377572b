/**
 * Vite build of the creature web front end. `npm run build:web -w @seed/creatures` writes the production
 * build to `web/dist`, which the creature server serves at `/`. `npm run dev:web` is for development only:
 * it proxies `/graphql` to a creature server on `CREATURES_URL` (default http://localhost:4000).
 */
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: true,
    chunkSizeWarningLimit: 1024,
  },
  server: {
    proxy: { '/graphql': process.env.CREATURES_URL ?? 'http://localhost:4000' },
  },
});
