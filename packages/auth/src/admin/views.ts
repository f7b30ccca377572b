/**
 * The API views of the administration REST API's records (spec 001 "Administration REST API"): what the
 * routes answer for users, roles, permissions, clients and audit events — never password hashes, security
 * stamps or client secrets.
 */

import { isSealedSecret } from '../oauth/client-secrets.ts';
import type { AuditEvent, ClientRecord, PermissionRecord, RoleRecord, UserRecord } from '../store/types.ts';
import { iso } from './route-docs.ts';

/** The API view of a user (no password hash, no security stamp). */
export function userView(user: UserRecord, now: number) {
  return {
    id: user.id,
    userName: user.userName,
    isEnabled: user.isEnabled,
    isLockedOut: user.lockoutEnd !== null && user.lockoutEnd > now,
    lockoutEnd: user.lockoutEnd === null ? null : iso(user.lockoutEnd),
    accessFailedCount: user.accessFailedCount,
    hasPassword: user.passwordHash !== null,
    roles: user.roles,
    directPermissions: user.directPermissions,
    deniedPermissions: user.deniedPermissions,
    displayName: user.displayName,
    givenName: user.givenName,
    familyName: user.familyName,
    email: user.email,
    emailVerified: user.emailVerified,
    phoneNumber: user.phoneNumber,
    phoneNumberVerified: user.phoneNumberVerified,
    address: user.address,
    createdAt: iso(user.createdAt),
    updatedAt: iso(user.updatedAt),
  };
}

/** The API view of a role. */
export function roleView(role: RoleRecord) {
  return {
    id: role.id,
    name: role.name,
    description: role.description,
    permissions: role.permissions,
    deniedPermissions: role.deniedPermissions,
    parentRoles: role.parentRoles,
    isSystem: role.isSystem,
    createdAt: iso(role.createdAt),
    updatedAt: iso(role.updatedAt),
  };
}

/** The API view of a permission catalog entry. */
export function permissionView(permission: PermissionRecord) {
  return { code: permission.code, description: permission.description, createdAt: iso(permission.createdAt) };
}

/** The API view of a client (no secret hash). */
export function clientView(client: ClientRecord) {
  return {
    clientId: client.clientId,
    displayName: client.displayName,
    clientType: client.clientType,
    hasSecret: client.secretHash !== null,
    secretStorage:
      client.secretHash === null ? null : isSealedSecret(client.secretHash) ? 'sealed' : 'hashed',
    isEnabled: client.isEnabled,
    redirectUris: client.redirectUris,
    allowedGrantTypes: client.allowedGrantTypes,
    allowedScopes: client.allowedScopes,
    permissions: client.permissions,
    postLogoutRedirectUris: client.postLogoutRedirectUris,
    backchannelLogoutUri: client.backchannelLogoutUri,
    requireConsent: client.requireConsent,
    metadata: client.metadata,
    createdAt: iso(client.createdAt),
    updatedAt: iso(client.updatedAt),
  };
}

/** The API view of an audit event. */
export function auditView(event: AuditEvent) {
  return {
    id: event.id,
    time: iso(event.time),
    category: event.category,
    outcome: event.outcome,
    subjectId: event.subjectId,
    subjectName: event.subjectName,
    clientId: event.clientId,
    failureCode: event.failureCode,
    remoteAddress: event.remoteAddress,
    details: event.details,
  };
}
