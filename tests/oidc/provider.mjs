// A real OpenID Connect provider on loopback for the SSO tests: node-oidc-provider with its built-in
// development login form (any password), one confidential client for ragsite, and people whose
// `groups` claim the tests map to staff, superusers, readers' labels, or nothing.
//
//   node provider.mjs <port> <ragsite base URL> <client id> <client secret>
import Provider from "oidc-provider";

const [port, ragsite, clientId, clientSecret] = process.argv.slice(2);
const PEOPLE = {
  alice: { name: "Alice Admin", groups: ["it-admins"] },
  sam: { name: "Sam Staff", groups: ["librarians", "hr"] },
  olga: { name: "Olga Outsider", groups: ["sales"] },
};

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [`${ragsite}/sso/callback`],
      post_logout_redirect_uris: [`${ragsite}/admin/login/`],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name", "preferred_username"],
    groups: ["groups"],
  },
  scopes: ["openid", "email", "profile", "groups"],
  // The scopes' claims go into the ID token itself, which is what ragsite reads.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  cookies: { keys: ["test-only-cookie-key-0123456789"] },
  async findAccount(ctx, id) {
    const person = PEOPLE[id] || { name: id, groups: [] };
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: `${id}@example.org`,
          email_verified: true,
          name: person.name,
          preferred_username: id,
          groups: person.groups,
        };
      },
    };
  },
  // Every scope and claim granted at once: no consent screen between login and ragsite.
  async loadExistingGrant(ctx) {
    const existing = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (existing) return ctx.oidc.provider.Grant.find(existing);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope("openid email profile groups");
    await grant.save();
    return grant;
  },
});
provider.listen(Number(port), "127.0.0.1", () => console.log(`oidc provider listening on ${port}`));
