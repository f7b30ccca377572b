/**
 * The creature server's life cycle: `listen` (after the store is ready) and the graceful `close` (stop
 * the streaming transports, stop accepting, let in-flight requests finish up to a timeout, then close the
 * store the server owns).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Store } from '../store.ts';

/** Options of {@link serverLifecycle}. */
export interface LifecycleOptions {
  httpServer: Server;
  store: Store;
  logger: Logger;
  /** Close the store on `close()` (false for a store passed in by the caller). */
  ownsStore: boolean;
  /** How long `close()` waits for in-flight requests before cutting connections, in ms (default 10000). */
  shutdownTimeoutMs?: number;
  /**
   * First step of `close()`: ends the long-lived transports (SSE, multipart, WebSocket); the server stops
   * accepting once the returned promise settles.
   */
  stopTransports(): Promise<void>;
  /** Called once the last connection has ended, before the store closes (e.g. to detach from change events). */
  detach(): void;
}

/** The life cycle half of a `CreatureServer`. */
export interface Lifecycle {
  /** Base URL once listening, e.g. `http://127.0.0.1:4000` (`''` before). */
  readonly url: string;
  /**
   * Waits for the store to be ready, then listens on `port` (default 4000; 0 picks a free port) and
   * `host`; resolves with the bound address. Rejects with the store's or the server's error.
   */
  listen(port?: number, host?: string): Promise<AddressInfo>;
  /** Graceful shutdown (see the module docs); the same promise on every call. */
  close(): Promise<void>;
}

/** Creates the life cycle of `options.httpServer`. */
export function serverLifecycle(options: LifecycleOptions): Lifecycle {
  const { httpServer, store, logger } = options;
  let url = '';
  let closing: Promise<void> | undefined;
  return {
    get url() {
      return url;
    },
    async listen(port = 4000, host?: string) {
      await store.ready();
      return new Promise<AddressInfo>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(port, host, () => {
          httpServer.off('error', reject);
          const address = httpServer.address() as AddressInfo;
          const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
          url = `http://${shownHost === '0.0.0.0' || shownHost === '[::]' ? 'localhost' : shownHost}:${address.port}`;
          logger.info({ address: address.address, port: address.port, url: `${url}/graphql` }, 'listening');
          resolve(address);
        });
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        logger.info('shutting down');
        const timer = setTimeout(() => httpServer.closeAllConnections(), options.shutdownTimeoutMs ?? 10_000);
        timer.unref();
        // Keep-alive connections become idle once their in-flight response is sent: close them then.
        const sweeper = setInterval(() => httpServer.closeIdleConnections(), 50);
        sweeper.unref();
        const finish = async () => {
          clearTimeout(timer);
          clearInterval(sweeper);
          options.detach();
          if (options.ownsStore) {
            try {
              await store.close();
            } catch (err) {
              logger.warn({ err }, 'closing the store failed');
            }
          }
          logger.info('shutdown complete');
          resolve();
        };
        void options.stopTransports().then(() => {
          if (!httpServer.listening) return void finish();
          httpServer.close(() => void finish());
          httpServer.closeIdleConnections();
        });
      });
      return closing;
    },
  };
}
