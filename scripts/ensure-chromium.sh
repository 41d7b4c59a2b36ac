#!/usr/bin/env bash
# Make sure a Chromium and its fonts are installed; install them with apt when we can.
set -euo pipefail
if [ -n "${PRESSROOM_CHROMIUM:-}" ] && [ -x "${PRESSROOM_CHROMIUM}" ]; then exit 0; fi
need=()
want=()  # installed when apt can, not required
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
  || command -v google-chrome >/dev/null 2>&1 || need+=(chromium)
# The headless shell renders a PDF for about half a full Chromium's CPU; the renderer uses
# it where installed (PRESSROOM_CHROMIUM's default), else the full browser.
[ -x /usr/lib/chromium/chromium-headless-shell ] || command -v chrome-headless-shell >/dev/null 2>&1 \
  || want+=(chromium-headless-shell)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
[ -d /usr/share/fonts/truetype/liberation ] || need+=(fonts-liberation)
# Noto: every common script as text, not empty boxes (CJK, Arabic, Hebrew, Devanagari,
# colour emoji, besides Latin, Greek and Cyrillic).
[ -e /usr/share/fonts/truetype/noto/NotoSans-Regular.ttf ] || need+=(fonts-noto-core)
[ -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || need+=(fonts-noto-cjk)
[ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || need+=(fonts-noto-color-emoji)
# sRGB.icc: the output intent of PDF/A files (options.pdfa, options.facturx).
[ -e /usr/share/color/icc/sRGB.icc ] || need+=(icc-profiles-free)
[ ${#need[@]} -eq 0 ] && [ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing ${need[*]} ${want[*]} with apt-get…"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Not every release packages the headless shell: without it, the full Chromium serves.
  [ ${#want[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null \
    || echo "(${want[*]} is not available: the renderer uses the full Chromium)" >&2
  exit 0
fi
[ ${#need[@]} -eq 0 ] && exit 0
echo "Pressroom needs: ${need[*]}" >&2
echo "Install them (Debian/Ubuntu: sudo apt-get install ${need[*]})," >&2
echo "or point PRESSROOM_CHROMIUM at a Chromium binary." >&2
exit 1
