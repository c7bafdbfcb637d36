# shellcheck shell=bash
# Installs Debian's Chromium and ChromeDriver when missing (the crawler and its tests drive
# real headless Chromium). Sourced by the project's scripts.

lps_chromium_ensure() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    return 0
  fi
  printf '[lps] %s\n' "installing chromium and chromium-driver (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium chromium-driver >/dev/null
  command -v chromium >/dev/null && command -v chromedriver >/dev/null
}
