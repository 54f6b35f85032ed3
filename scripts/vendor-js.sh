#!/usr/bin/env bash
# Vendors the browser libraries the chat page uses into static/vendor/ (committed output), so the
# page loads nothing from another origin and needs no build step. Re-run to upgrade: bump a
# version below, run, review the diff, commit.
set -euo pipefail

MARKED_VERSION=18.2.1
DOMPURIFY_VERSION=3.5.0
HIGHLIGHT_VERSION=11.12.0 # @highlightjs/cdn-assets: highlight.js built, its ES module included
KATEX_VERSION=0.19.1

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
# `npm pack` fetches the published tarball alone: no install scripts run, no dependency tree.
npm pack --silent "marked@$MARKED_VERSION" "dompurify@$DOMPURIFY_VERSION" \
  "@highlightjs/cdn-assets@$HIGHLIGHT_VERSION" "katex@$KATEX_VERSION" >/dev/null
mkdir marked dompurify highlight katex
tar -xzf "marked-$MARKED_VERSION.tgz" -C marked --strip-components=1
tar -xzf "dompurify-$DOMPURIFY_VERSION.tgz" -C dompurify --strip-components=1
tar -xzf "highlightjs-cdn-assets-$HIGHLIGHT_VERSION.tgz" -C highlight --strip-components=1
tar -xzf "katex-$KATEX_VERSION.tgz" -C katex --strip-components=1

mkdir -p "$dest"
cp marked/lib/marked.esm.js "$dest/marked.esm.js"
cp marked/LICENSE "$dest/marked.LICENSE"
cp dompurify/dist/purify.es.mjs "$dest/purify.es.mjs"
cp dompurify/LICENSE "$dest/dompurify.LICENSE"
# highlight.js's own build of its common languages (36) as one ES module, minified.
cp highlight/es/highlight.min.js "$dest/highlight.es.min.js"
cp highlight/LICENSE "$dest/highlight.LICENSE"
# KaTeX's ES module. The page asks it for MathML alone (static/markdown.js): no CSS, no fonts.
cp katex/dist/katex.mjs "$dest/katex.mjs"
cp katex/LICENSE "$dest/katex.LICENSE"
# Source maps point at files we do not ship; drop the reference so DevTools does not 404.
sed -i '/^\/\/# sourceMappingURL=/d' "$dest/marked.esm.js" "$dest/purify.es.mjs" \
  "$dest/highlight.es.min.js" "$dest/katex.mjs"

cat > "$dest/VERSIONS.md" <<MD
# Vendored browser libraries

Written by \`scripts/vendor-js.sh\` from the npm registry; do not edit by hand.

| library | version | file | license |
|---|---|---|---|
| [marked](https://github.com/markedjs/marked) | $MARKED_VERSION | marked.esm.js | MIT (marked.LICENSE) |
| [DOMPurify](https://github.com/cure53/DOMPurify) | $DOMPURIFY_VERSION | purify.es.mjs | Apache-2.0 or MPL-2.0 (dompurify.LICENSE) |
| [highlight.js](https://github.com/highlightjs/highlight.js) (npm: @highlightjs/cdn-assets) | $HIGHLIGHT_VERSION | highlight.es.min.js (es/highlight.min.js: the 36 common languages) | BSD-3-Clause (highlight.LICENSE) |
| [KaTeX](https://github.com/KaTeX/KaTeX) | $KATEX_VERSION | katex.mjs (dist/katex.mjs; MathML output only, so none of its CSS or fonts) | MIT (katex.LICENSE) |

sha256:
\`\`\`
$(cd "$dest" && sha256sum marked.esm.js purify.es.mjs highlight.es.min.js katex.mjs)
\`\`\`
MD
echo "vendored marked $MARKED_VERSION, DOMPurify $DOMPURIFY_VERSION, highlight.js $HIGHLIGHT_VERSION" \
  "and KaTeX $KATEX_VERSION into $dest"
