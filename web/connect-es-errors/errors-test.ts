// Run by cmd/usersd's TestConnectESDecodesEveryErrorsDetails against a real usersd: the page's
// generated client, on connect-es's Connect and gRPC-Web transports, makes the service's errors and
// decodes their details, google.rpc.ErrorInfo and google.rpc.BadRequest, with a registry built
// from the descriptors the test hands over (USERSD_ERROR_DETAILS, a FileDescriptorSet in base64).
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { createFileRegistry, fromBinary, type DescMessage } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Users } from "../src/gen/users/v1/users_pb";

const baseUrl = process.env.USERSD_URL!;
const key = process.env.USERSD_KEY!;
const registry = createFileRegistry(
  fromBinary(FileDescriptorSetSchema, Buffer.from(process.env.USERSD_ERROR_DETAILS!, "base64")),
);
const errorInfo = registry.getMessage("google.rpc.ErrorInfo") as DescMessage;
const badRequest = registry.getMessage("google.rpc.BadRequest") as DescMessage;

type Expected = { code: Code; reason: string; metadata: Record<string, string>; field?: string };

async function expectError(what: string, call: () => Promise<unknown>, want: Expected): Promise<void> {
  try {
    await call();
  } catch (e) {
    const err = ConnectError.from(e);
    if (err.code !== want.code) throw new Error(`${what}: code ${Code[err.code]} (${err.rawMessage}), want ${Code[want.code]}`);
    const infos = err.findDetails(errorInfo) as unknown as { reason: string; domain: string; metadata: Record<string, string> }[];
    if (infos.length !== 1) throw new Error(`${what}: ${infos.length} ErrorInfo details, want 1 (${err.details.length} details)`);
    const info = infos[0];
    if (info.reason !== want.reason || info.domain !== "usersd" || JSON.stringify(info.metadata) !== JSON.stringify(want.metadata)) {
      throw new Error(`${what}: ErrorInfo ${JSON.stringify(info)}, want ${want.reason} ${JSON.stringify(want.metadata)}`);
    }
    const violations = (err.findDetails(badRequest) as unknown as { fieldViolations: { field: string; description: string }[] }[])
      .flatMap((b) => b.fieldViolations);
    if (want.field !== undefined && (violations.length !== 1 || violations[0].field !== want.field || violations[0].description !== err.rawMessage)) {
      throw new Error(`${what}: field violations ${JSON.stringify(violations)}, want one of ${want.field}`);
    }
    if (want.field === undefined && violations.length !== 0) throw new Error(`${what}: field violations on a ${Code[err.code]} error`);
    return;
  }
  throw new Error(`${what}: no error`);
}

const sendKey: Interceptor = (next) => (req) => {
  req.header.set("x-api-key", key);
  return next(req);
};

async function main(): Promise<void> {
  const transports: [string, Transport][] = [
    ["Connect", createConnectTransport({ baseUrl, interceptors: [sendKey] })],
    ["gRPC-Web", createGrpcWebTransport({ baseUrl, interceptors: [sendKey] })],
  ];
  for (const [name, transport] of transports) {
    const client = createClient(Users, transport);
    await expectError(`${name}: a nameless user`, () => client.createUser({ user: { name: " " } }),
      { code: Code.InvalidArgument, reason: "INVALID_FIELD", metadata: { field: "name" }, field: "name" });
    await expectError(`${name}: a missing user`, () => client.getUser({ id: 424242 }),
      { code: Code.NotFound, reason: "USER_NOT_FOUND", metadata: { id: "424242" } });
    await expectError(`${name}: a stale etag`, async () => {
      const { user } = await client.createUser({ user: { name: "Ada" } });
      return client.updateUser({ id: user!.id, user: { name: "Ada L" }, updateMask: { paths: ["name"] }, etag: '"99"' });
    }, { code: Code.Aborted, reason: "ETAG_MISMATCH", metadata: {} });
    console.log(`${name}: ok`);
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
