// Verifies webhook deliveries with other people's implementations: the signature with the Standard
// Webhooks library (standardwebhooks), the envelope with the CloudEvents SDK (cloudevents). Reads a
// JSON array of {secret, headers, body} from the file named by its argument; prints "verified N"
// or fails naming the first delivery that does not verify. NODE_PATH names web/node_modules.
const fs = require("fs");
const { Webhook } = require("standardwebhooks");
const { HTTP } = require("cloudevents");

const deliveries = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
deliveries.forEach((d, i) => {
  try {
    const verified = new Webhook(d.secret).verify(d.body, d.headers);
    if (verified.id === undefined) throw new Error("the verified payload has no id");
    const event = HTTP.toEvent({ headers: d.headers, body: d.body });
    event.validate();
    if (event.id !== d.headers["webhook-id"]) throw new Error(`event id ${event.id}, webhook-id ${d.headers["webhook-id"]}`);
    if (!event.type.startsWith("dev.usersd.user.")) throw new Error(`type ${event.type}`);
  } catch (err) {
    console.error(`delivery ${i}: ${err.message}`);
    process.exit(1);
  }
});
console.log(`verified ${deliveries.length}`);
