/** Test PKI: a CA and a server certificate, made with node-forge (test upstreams of the secrets proxy). */
import { generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';

/** A CA and a server certificate for `host.sandbox.internal`, as PEM. */
export function testPki(): { caPem: string; keyPem: string; certPem: string } {
  const pair = () => {
    const k = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return {
      priv: forge.pki.privateKeyFromPem(k.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()),
      pub: forge.pki.publicKeyFromPem(k.publicKey.export({ type: 'spki', format: 'pem' }).toString()),
      pem: k.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    };
  };
  const caKey = pair();
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKey.pub;
  ca.serialNumber = '01';
  ca.validity.notBefore = new Date(Date.now() - 3600_000);
  ca.validity.notAfter = new Date(Date.now() + 86400_000);
  const caName = [{ name: 'commonName', value: 'network test upstream CA' }];
  ca.setSubject(caName);
  ca.setIssuer(caName);
  ca.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  ca.sign(caKey.priv, forge.md.sha256.create());
  const leafKey = pair();
  const leaf = forge.pki.createCertificate();
  leaf.publicKey = leafKey.pub;
  leaf.serialNumber = '02';
  leaf.validity.notBefore = ca.validity.notBefore;
  leaf.validity.notAfter = ca.validity.notAfter;
  leaf.setSubject([{ name: 'commonName', value: 'host.sandbox.internal' }]);
  leaf.setIssuer(caName);
  leaf.setExtensions([
    { name: 'subjectAltName', altNames: [{ type: 2, value: 'host.sandbox.internal' }] },
    { name: 'extKeyUsage', serverAuth: true },
  ]);
  leaf.sign(caKey.priv, forge.md.sha256.create());
  return {
    caPem: forge.pki.certificateToPem(ca),
    keyPem: leafKey.pem,
    certPem: forge.pki.certificateToPem(leaf),
  };
}
