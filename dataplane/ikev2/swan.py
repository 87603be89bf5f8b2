"""strongSwan (charon + swanctl, Debian packages) as a real IKEv2 peer inside a lab namespace.

One charon per use, each with its own folder: `strongswan.conf` (STRONGSWAN_CONF), `swanctl.conf`
with its credentials, the vici socket and a log file. charon's pid file path is fixed
(/run/charon.pid), so each instance runs in a private mount namespace (`unshare -m`) with a tmpfs
on /run. CHILD_SAs are installed by the kernel-libipsec plugin (ESP in user space on a TUN device),
since this kernel has no ESP transform. Used by the integration tests and bench/flexvpn.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

CHARON = "/usr/lib/ipsec/charon"
PLUGINS = ("random nonce openssl pem pkcs1 pkcs8 x509 revocation constraints pubkey sha1 sha2 hmac aes gcm kdf "
           "kernel-libipsec kernel-netlink socket-default vici")


def available() -> str | None:
    """None when charon and swanctl are installed, else why not."""
    missing = [p for p in (CHARON, shutil.which("swanctl") or "/usr/sbin/swanctl") if not os.path.exists(p)]
    if missing:
        return f"strongSwan missing: {', '.join(missing)} (apt-get install strongswan-charon strongswan-swanctl " \
               f"libcharon-extra-plugins libstrongswan-standard-plugins)"
    if not os.path.exists("/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"):
        return "strongSwan's kernel-libipsec plugin is missing (apt-get install libcharon-extra-plugins)"
    return None


@dataclass
class Peer:
    """Where a charon instance lives and how to talk to it."""

    ns: str
    folder: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def vici(self) -> str:
        return f"unix://{self.folder}/charon.vici"

    @property
    def log(self) -> Path:
        return self.folder / "charon.log"

    def swanctl(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.ns, "swanctl", *args, "--uri", self.vici],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "STRONGSWAN_CONF": str(self.folder / "strongswan.conf")})

    def start(self, timeout: float = 10.0) -> None:
        env = {**os.environ, "STRONGSWAN_CONF": str(self.folder / "strongswan.conf")}
        script = f"mount -t tmpfs tmpfs /run && exec {CHARON}"
        self.process = subprocess.Popen(["ip", "netns", "exec", self.ns, "unshare", "-m", "sh", "-c", script],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.folder / "charon.vici").exists() and self.swanctl("--stats").returncode == 0:
                break
            if self.process.poll() is not None:
                stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"charon exited: {stderr}")
            time.sleep(0.05)
        else:
            raise RuntimeError(f"charon did not open its vici socket in {timeout} s")
        result = self.swanctl("--load-all", "--file", str(self.folder / "swanctl.conf"))
        if result.returncode != 0:
            raise RuntimeError(f"swanctl --load-all failed: {result.stdout} {result.stderr}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.process = None

    def initiate(self, child: str = "net", ike: str = "gw", timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
        return self.swanctl("--initiate", "--child", child, "--ike", ike, "--timeout", str(int(timeout)),
                            timeout=timeout + 5)

    def list_sas(self) -> str:
        return self.swanctl("--list-sas").stdout


def strongswan_conf(folder: Path, port: int = 500, extra: str = "", log_level: int = 2,
                    install_routes: bool = False) -> str:
    return f"""charon {{
  load = {PLUGINS}
  port = {port}
  port_nat_t = 4500
  dos_protection = no
  follow_redirects = yes
  retransmit_tries = 3
  retransmit_timeout = 1.0
  retransmit_base = 1.4
  install_routes = {'yes' if install_routes else 'no'}
  plugins {{
    vici {{
      socket = unix://{folder}/charon.vici
    }}
    kernel-libipsec {{
      allow_peer_ts = yes
    }}
  }}
  filelog {{
    log {{
      path = {folder}/charon.log
      default = {min(1, log_level)}
      ike = {log_level}
      time_format = %T
      flush_line = yes
    }}
  }}
{extra}}}
"""


def initiator(ns: str, folder: Path, gateway: str, local: str, identity: str, psk: str | None,
              cert: tuple[bytes, bytes, bytes] | None = None, proposal: str = "aes256-sha256-ecp256",
              esp: str = "aes256-sha256", vip: bool = True, remote_ts: str = "0.0.0.0/0",
              install_routes: bool = False, child_rekey_s: int = 0) -> Peer:
    """A strongSwan road warrior towards GATEWAY: the pre-shared key PSK (a lab's: its drawn key), or
    PSK None and CERT = (CA PEM, certificate PEM, key PEM).
    With INSTALL_ROUTES, charon routes REMOTE_TS into kernel-libipsec's TUN device (from the virtual
    address), so traffic to it crosses the tunnel. CHILD_REKEY_S: rekey the CHILD_SA that often (0: never)."""
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("x509ca", "x509", "private"):
        (folder / sub).mkdir(exist_ok=True)
    (folder / "strongswan.conf").write_text(strongswan_conf(folder, install_routes=install_routes))
    if cert is not None:
        (folder / "x509ca" / "ca.crt").write_bytes(cert[0])
        (folder / "x509" / "client.crt").write_bytes(cert[1])
        (folder / "private" / "client.key").write_bytes(cert[2])
        local_auth = "auth = pubkey\n      certs = client.crt"
        remote_auth = "auth = pubkey\n      id = %any"
        secrets = ""
    else:
        local_auth = f"auth = psk\n      id = {identity}"
        remote_auth = "auth = psk\n      id = %any"
        secrets = f"secrets {{\n  ike-lab {{\n    secret = {psk}\n  }}\n}}\n"
    (folder / "swanctl.conf").write_text(f"""connections {{
  gw {{
    version = 2
    remote_addrs = {gateway}
    local_addrs = {local}
    {'vips = 0.0.0.0' if vip else ''}
    proposals = {proposal}
    rekey_time = 0
    local {{
      {local_auth}
    }}
    remote {{
      {remote_auth}
    }}
    children {{
      net {{
        remote_ts = {remote_ts}
        esp_proposals = {esp}
        rekey_time = {child_rekey_s}s
        {f'life_time = {3 * child_rekey_s}s' if child_rekey_s else ''}
        start_action = none
      }}
    }}
  }}
}}
{secrets}""")
    return Peer(ns, folder)


def responder(ns: str, folder: Path, local: str, psk: str, proposal: str = "aes256-sha256-ecp256",
              esp: str = "aes256-sha256", pool: str | None = None, log_level: int = 0,
              install_routes: bool = False) -> Peer:
    """A strongSwan responder (the benchmark's reference): the pre-shared key PSK, any client, optional address pool;
    quiet by default (log level 0: one line per IKE SA, like the gateway daemon)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "strongswan.conf").write_text(strongswan_conf(folder, log_level=log_level,
                                                            install_routes=install_routes))
    pools = f"pools {{\n  p {{\n    addrs = {pool}\n  }}\n}}\n" if pool else ""
    (folder / "swanctl.conf").write_text(f"""connections {{
  rw {{
    version = 2
    local_addrs = {local}
    proposals = {proposal}
    {'pools = p' if pool else ''}
    unique = never
    local {{
      auth = psk
      id = {local}
    }}
    remote {{
      auth = psk
      id = %any
    }}
    children {{
      net {{
        local_ts = 0.0.0.0/0
        esp_proposals = {esp}
      }}
    }}
  }}
}}
secrets {{
  ike-lab {{
    secret = {psk}
  }}
}}
{pools}""")
    return Peer(ns, folder)
