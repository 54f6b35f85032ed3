#!/usr/bin/env bash
# Vendors the browser libraries the chat page uses into static/vendor/ (committed output), so the
# page loads nothing from another origin and needs no build step. Re-run to upgrade: bump a
# version below, run, review the diff, commit.
set -euo pipefail

MARKED_VERSION=18.2.1
DOMPURIFY_VERSION=3.5.0

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
# `npm pack` fetches the published tarball alone: no install scripts run, no dependency tree.
npm pack --silent "marked@$MARKED_VERSION" "dompurify@$DOMPURIFY_VERSION" >/dev/null
mkdir marked dompurify
tar -xzf "marked-$MARKED_VERSION.tgz" -C marked --strip-components=1
tar -xzf "dompurify-$DOMPURIFY_VERSION.tgz" -C dompurify --strip-components=1

mkdir -p "$dest"
cp marked/lib/marked.esm.js "$dest/marked.esm.js"
cp marked/LICENSE "$dest/marked.LICENSE"
cp dompurify/dist/purify.es.mjs "$dest/purify.es.mjs"
cp dompurify/LICENSE "$dest/dompurify.LICENSE"
# Source maps point at files we do not ship; drop the reference so DevTools does not 404.
sed -i '/^\/\/# sourceMappingURL=/d' "$dest/marked.esm.js" "$dest/purify.es.mjs"

cat > "$dest/VERSIONS.md" <<MD
# Vendored browser libraries

Written by \`scripts/vendor-js.sh\` from the npm registry; do not edit by hand.

| library | version | file | license |
|---|---|---|---|
| [marked](https://github.com/markedjs/marked) | $MARKED_VERSION | marked.esm.js | MIT (marked.LICENSE) |
| [DOMPurify](https://github.com/cure53/DOMPurify) | $DOMPURIFY_VERSION | purify.es.mjs | Apache-2.0 or MPL-2.0 (dompurify.LICENSE) |

sha256:
\`\`\`
$(cd "$dest" && sha256sum marked.esm.js purify.es.mjs)
\`\`\`
MD
echo "vendored marked $MARKED_VERSION and DOMPurify $DOMPURIFY_VERSION into $dest"
