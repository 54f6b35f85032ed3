"""A real nginx in front of a live server, with a config the test writes, on a free port.

nginx runs in the foreground without a master process (`master_process off`), so it stays one
process owned by whoever runs the tests, root or not, and never switches to another user that
could not write its temp prefix. Every path nginx would otherwise take from its compiled-in
defaults (/var/log, /var/lib/nginx, /run) points into the test's own directory.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx

from streaming.programs.liveserver import stop_process
from tests.support.live import free_port, wait_until

TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")

CONFIG = """\
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    default_type application/octet-stream;
{temp_paths}
{site}
}}
"""

SITE = """\
{http}
upstream app {{
    server 127.0.0.1:{upstream_port};
    keepalive 4;
}}
server {{
    listen 127.0.0.1:{port};
{server}
    location / {{
        proxy_pass http://app;
        # Django checks the Host against ALLOWED_HOSTS; nginx would send "app".
        proxy_set_header Host $http_host;
{location}
    }}
}}
"""

# What nginx needs to talk HTTP/1.1 with keep-alive to the upstream; without these it speaks
# HTTP/1.0, its default.
HTTP11_UPSTREAM = """\
proxy_http_version 1.1;
proxy_set_header Connection "";
"""
# Buffering as nginx is configured, whatever the response's X-Accel-Buffering says.
IGNORE_ACCEL = "proxy_ignore_headers X-Accel-Buffering;"
GZIP_EVENT_STREAMS = "gzip on;\ngzip_types text/event-stream;\ngzip_min_length 0;"

# Named set-ups: keyword arguments of start_nginx.
SETUPS: dict[str, dict[str, str]] = {
    # nginx's own defaults: HTTP/1.0 to the upstream, proxy_buffering on.
    "defaults": {"location": ""},
    "http11": {"location": HTTP11_UPSTREAM},
    "gzip": {"location": HTTP11_UPSTREAM, "server": GZIP_EVENT_STREAMS},
    "gzip_buffered": {"location": HTTP11_UPSTREAM + IGNORE_ACCEL, "server": GZIP_EVENT_STREAMS},
    # Buffering really on for the stream: the set-ups the article blames for fixed-size lumps.
    "buffered": {"location": HTTP11_UPSTREAM + IGNORE_ACCEL},
    "buffered_http10": {"location": IGNORE_ACCEL},
    "buffered_small_buffers": {
        "location": HTTP11_UPSTREAM
        + IGNORE_ACCEL
        + """
proxy_buffer_size 1k;
proxy_buffers 2 1k;
proxy_busy_buffers_size 1k;
"""
    },
    "buffered_no_temp_file": {
        "location": HTTP11_UPSTREAM + IGNORE_ACCEL + "proxy_max_temp_file_size 0;"
    },
    # A proxy that replaces the app's Cache-Control, dropping no-transform.
    "cache_control_replaced": {
        "location": HTTP11_UPSTREAM
        + """
proxy_hide_header Cache-Control;
add_header Cache-Control "no-cache" always;
"""
    },
}


def nginx_binary() -> str | None:
    """The nginx executable, if installed (Debian puts it in /usr/sbin, off some users' PATH)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def _indent(directives: str, spaces: int) -> str:
    return "\n".join(
        " " * spaces + line if line.strip() else "" for line in directives.strip().splitlines()
    )


@dataclass
class Nginx:
    """A running nginx and where it listens."""

    port: int
    prefix: Path
    process: subprocess.Popen
    config: str

    @property
    def url(self) -> str:
        """Base URL of the proxy."""
        return f"http://127.0.0.1:{self.port}"

    def error_log(self) -> str:
        """What nginx logged so far."""
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop nginx (SIGTERM is its fast shutdown), then make sure it is gone."""
        stop_process(self.process)


def start_nginx(
    prefix: Path,
    upstream_port: int,
    *,
    location: str = HTTP11_UPSTREAM,
    server: str = "",
    http: str = "",
    site: str | None = None,
    ready_path: str = "/healthz",
    timeout: float = 20.0,
) -> Nginx:
    """Start nginx on a free port, proxying to `upstream_port`.

    The site is built from `http`, `server` and `location` directives, or given whole as `site`
    (an http-level config such as deploy/nginx.conf) with `{port}` and `{upstream_port}` in it.
    """
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (make test installs Debian's nginx-light)")
    prefix.mkdir(parents=True, exist_ok=True)
    for name in TEMP_PATHS:
        (prefix / name).mkdir(exist_ok=True)
    port = free_port()
    if site is None:
        site = SITE.format(
            port=port,
            upstream_port=upstream_port,
            http=http,
            server=_indent(server, 4),
            location=_indent(location, 8),
        )
    else:
        site = site.replace("{port}", str(port)).replace("{upstream_port}", str(upstream_port))
    config = CONFIG.format(
        prefix=prefix,
        temp_paths=_indent(
            "\n".join(f"{name}_temp_path {prefix / name};" for name in TEMP_PATHS), 4
        ),
        site=_indent(site, 4),
    )
    config_path = prefix / "nginx.conf"
    config_path.write_text(config)
    # -e: the error log before the config is read, so nginx never touches /var/log as a user.
    command = [binary, "-p", str(prefix), "-c", str(config_path), "-e", str(prefix / "error.log")]
    check = subprocess.run([*command, "-t", "-q"], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"nginx rejected the config:\n{check.stderr}\n{config}")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = Nginx(port, prefix, process, config)

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited:\n{proxy.error_log()}")
        return httpx.get(proxy.url + ready_path, timeout=2.0).status_code == 200

    try:
        wait_until(ready, timeout)
    except BaseException:
        proxy.stop()
        raise
    return proxy
