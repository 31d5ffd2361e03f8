#!/bin/sh
# The API reference at /docs: Swagger UI from npm (swagger-ui-dist, pinned in package.json), served
# from public/docs/ beside its page (docs/index.html) and the script that starts it (docs/init.js).
# The bundle is over the repository's 1 MB limit for a file, so it is kept gzipped; the server
# sends it as it is to browsers that take gzip (all of them) and inflates it for any other client.
set -eu
src=node_modules/swagger-ui-dist
mkdir -p public/docs
gzip -9 -n -c "$src/swagger-ui-bundle.js" > public/docs/swagger-ui-bundle.js.gz
# The stylesheet ends by pointing at a source map that is not served.
sed '/sourceMappingURL=/d' "$src/swagger-ui.css" > public/docs/swagger-ui.css
cp "$src/LICENSE" public/docs/swagger-ui-LICENSE.txt
cp "$src/NOTICE" public/docs/swagger-ui-NOTICE.txt
cp "$src/swagger-ui-bundle.js.LICENSE.txt" public/docs/swagger-ui-bundle.js.LICENSE.txt
