#!/usr/bin/env bash
# Mesa's software Vulkan driver (lavapipe) for the WebGPU provider on a CI host without a GPU.
#
# Debian bookworm's own mesa-vulkan-drivers (22.3) lacks Vulkan features Dawn needs ("No
# supported adapters"); bookworm-backports' (25.0.x, with its libdrm2) works. This downloads
# those two packages from the machine's own Debian mirror into a folder and unpacks them there:
# no sources.list change, no system upgrade. It installs the Vulkan loader (libvulkan1) and
# bookworm's mesa-vulkan-drivers only for the libraries lavapipe links (LLVM 15, xcb).
#
#   bash plugins/webgpu/scripts/setup_lavapipe.sh [FOLDER]   # default: $LAVAPIPE_DIR or /tmp/ortplug-lavapipe
#   source FOLDER/env.sh                                      # VK_DRIVER_FILES, LD_LIBRARY_PATH, Mesa's cache
#
# Needs root (apt-get) on Debian bookworm x86_64 or aarch64. Exits non-zero with the reason when
# the driver cannot be installed; the WebGPU tests then fail with that reason.
set -euo pipefail
W=${1:-${LAVAPIPE_DIR:-/tmp/ortplug-lavapipe}}
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
  echo "setup_lavapipe: expected Debian bookworm, got ${PRETTY_NAME:-unknown}" >&2
  exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
mkdir -p "$W"/lists/partial "$W"/cache/archives/partial "$W"/root
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends libvulkan1 mesa-vulkan-drivers >/dev/null
# The machine's own Debian mirror (first URIs line of its deb822 sources, else sources.list).
mirror=$(grep -h -m1 "^URIs:" /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' || true)
[ -n "$mirror" ] || mirror=$(grep -h -m1 "^deb " /etc/apt/sources.list 2>/dev/null | awk '{print $2}' || true)
if [ -z "$mirror" ]; then
  echo "setup_lavapipe: no Debian mirror found in /etc/apt/sources.list(.d)" >&2
  exit 1
fi
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main" \
  >"$W/sources.list"
A=(-o Dir::Etc::sourcelist="$W/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$W/lists"
  -o Dir::Cache="$W/cache" -o APT::Sandbox::User=root)
apt-get "${A[@]}" update -qq
rm -f "$W"/*.deb
(cd "$W" && apt-get "${A[@]}" download -qq mesa-vulkan-drivers/bookworm-backports libdrm2/bookworm-backports)
for deb in "$W"/*.deb; do dpkg-deb -x "$deb" "$W/root"; done
lib="$W/root/usr/lib/$arch"
icd=$(ls "$W"/root/usr/share/vulkan/icd.d/lvp_icd*.json | head -n1)
sed "s#\"library_path\": \"[^\"]*\"#\"library_path\": \"$lib/libvulkan_lvp.so\"#" "$icd" >"$W/lvp_icd.json"
mkdir -p "$W/shader-cache"
cat >"$W/env.sh" <<EOS
# Written by plugins/webgpu/scripts/setup_lavapipe.sh: only the backports lavapipe driver is visible.
export VK_DRIVER_FILES=$W/lvp_icd.json VK_ICD_FILENAMES=$W/lvp_icd.json
export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export MESA_SHADER_CACHE_DIR=\${MESA_SHADER_CACHE_DIR:-$W/shader-cache}
export XDG_RUNTIME_DIR=\${XDG_RUNTIME_DIR:-/tmp}
EOS
echo "lavapipe $(ls "$W"/*.deb | sed -n 's#.*/mesa-vulkan-drivers_\([^_]*\)_.*#\1#p') in $W; source $W/env.sh"
