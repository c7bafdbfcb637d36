# shellcheck shell=bash
# Installs Debian's Chromium and ChromeDriver when missing (the crawler and its tests drive
# real Chromium), Xvfb (a display for headful Chromium) and Korean fonts (a browser without
# CJK glyphs is a bot tell, and Korean titles render as boxes). Sourced by the project's
# scripts.

lps_chromium_ensure() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
    && command -v Xvfb >/dev/null 2>&1 && lps_korean_font_present && lps_kill_binary_present; then
    return 0
  fi
  printf '[lps] %s\n' "installing chromium, chromium-driver, xvfb and Korean fonts (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium chromium-driver xvfb fonts-nanum fontconfig procps >/dev/null
  command -v chromium >/dev/null && command -v chromedriver >/dev/null \
    && command -v Xvfb >/dev/null && lps_korean_font_present && lps_kill_binary_present
}

# kill(1) as a program (procps): the node's watchdogs signal process groups with it.
lps_kill_binary_present() {
  [ -x /usr/bin/kill ] || [ -x /bin/kill ]
}

lps_korean_font_present() {
  command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=ko 2>/dev/null | head -n 1)" ]
}
