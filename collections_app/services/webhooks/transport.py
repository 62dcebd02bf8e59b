"""Where a webhook may be sent, and one bounded POST there (services.webhooks has the overview).

Targets are checked against SSRF when a hook is saved and again at every attempt: http or https only,
and every address the host resolves to must be public unless WEBHOOK_ALLOW_PRIVATE is on. "Public" is
an explicit deny-list of every range in IANA's IPv4 and IPv6 special-purpose address registries (plus
multicast, and for IPv6 anything outside global unicast 2000::/3, so the deprecated site-local
fec0::/10 too), checked beside the standard library's `is_global`, whose tables vary by Python
version (3.11 took 192.0.0.8 and 192.88.99.1 for global). The connection then goes to the address
that was checked, so a name that resolves differently a moment later (DNS rebinding) cannot send the
request elsewhere; redirects are not followed.

An attempt has one deadline, WEBHOOK_TIMEOUT seconds from its start, for connecting, sending and the
whole answer: a receiver that trickles a byte at a time cannot hold a worker past it.
"""

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from ragsite.errors import RagsiteError

from ...conf import settings
from ...models import Webhook

MAX_URL_CHARS = Webhook._meta.get_field("url").max_length
ANSWER_BYTES = 64 * 1024  # of the answer's body read (and ignored): its status is what counts

# IANA IPv4 and IPv6 Special-Purpose Address Registries (2024 editions), every entry, whether or not the
# registry calls it globally reachable: a webhook goes to an ordinary unicast host, never to these.
SPECIAL_PURPOSE = tuple(
    ipaddress.ip_network(network)
    for network in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, 192.0.0.8 dummy, PCP/TURN, NAT64)
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.31.196.0/24",  # AS112-v4
        "192.52.193.0/24",  # AMT
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",  # private
        "192.175.48.0/24",  # direct delegation AS112
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved
        "255.255.255.255/32",  # limited broadcast
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::ffff:0:0/96",  # IPv4-mapped
        "64:ff9b::/96",  # IPv4/IPv6 translation (NAT64)
        "64:ff9b:1::/48",  # local-use translation
        "100::/64",  # discard-only
        "100:0:0:1::/64",  # dummy prefix
        "2001::/23",  # IETF protocol assignments (Teredo, benchmarking, AMT, AS112, ORCHID, DRIP)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4
        "2620:4f:8000::/48",  # direct delegation AS112
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing (SRv6) SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated; outside 2000::/3 too)
        "ff00::/8",  # multicast
    )
)
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


class InvalidWebhook(RagsiteError):
    code = "invalid_webhook_url"
    status = 400


def validate_url(url: str) -> str:
    """The URL if a delivery may go there; `InvalidWebhook` saying why not (resolving its host)."""
    host, port, _https = parts(url)
    addresses(host, port)
    return url


def parts(url: str) -> tuple[str, int, bool]:
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidWebhook(f"a webhook URL is 1 to {MAX_URL_CHARS} characters")
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError:
        raise InvalidWebhook("the webhook URL cannot be parsed") from None
    if split.scheme not in ("http", "https"):
        raise InvalidWebhook("a webhook URL is http:// or https://")
    if not split.hostname or split.username is not None or split.password is not None:
        raise InvalidWebhook("a webhook URL names a host, without a user name or password")
    https = split.scheme == "https"
    return split.hostname, port or (443 if https else 80), https


def addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, all checked; refuses the host when any is not public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise InvalidWebhook(f'the webhook host "{host}" does not resolve') from None
    found = list(dict.fromkeys(info[4][0] for info in infos))
    if not settings.WEBHOOK_ALLOW_PRIVATE:
        for address in found:
            if not public(address):
                raise InvalidWebhook(
                    f'the webhook host "{host}" resolves to a private, loopback, link-local or other '
                    "special-purpose address; refused (WEBHOOK_ALLOW_PRIVATE allows it)"
                )
    if not found:
        raise InvalidWebhook(f'the webhook host "{host}" does not resolve')
    return found


def public(address: str) -> bool:
    """True for an ordinary unicast address: in no special-purpose range, and global by the stdlib too."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip.version == 6 and ip not in GLOBAL_UNICAST_V6:
        return False
    if any(ip.version == network.version and ip in network for network in SPECIAL_PURPOSE):
        return False
    for form in (ip, getattr(ip, "ipv4_mapped", None), getattr(ip, "sixtofour", None)):
        if form is not None and (not form.is_global or form.is_multicast or form.is_reserved):
            return False
    return True


class DeadlinePassed(OSError):
    """The attempt's whole deadline passed before the receiver finished answering."""


def post(url: str, body: bytes, headers: dict) -> int:
    """POST to the address that was checked, never to one the name resolves to later, within one deadline
    for connecting, sending and the whole answer; the status code."""
    host, port, https = parts(url)
    timeout = float(settings.WEBHOOK_TIMEOUT)
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(f"the receiver did not answer within {timeout:g} s")
        return left

    error: OSError | None = None
    for address in addresses(host, port):
        try:
            raw = socket.create_connection((address, port), timeout=remaining())
            break
        except DeadlinePassed:
            raise
        except OSError as exc:
            error = exc
    else:
        raise error or OSError("no address to connect to")
    split = urlsplit(url)
    target = (split.path or "/") + (f"?{split.query}" if split.query else "")
    if https:
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=remaining(), context=context)
        connection.sock = context.wrap_socket(raw, server_hostname=host)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=remaining())
        connection.sock = raw
    # Each socket operation waits at most what is left, but a receiver sending a byte at a time never
    # lets one wait long: at the deadline the socket is shut, which ends whatever read is in progress.
    cut = threading.Event()

    def shut() -> None:
        cut.set()
        try:
            socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    timer = threading.Timer(remaining(), shut)
    timer.daemon = True
    timer.start()
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        response.read(ANSWER_BYTES)
        if cut.is_set():
            raise DeadlinePassed(f"the receiver did not answer within {timeout:g} s")
        return response.status
    except (OSError, http.client.HTTPException) as exc:
        if cut.is_set() or time.monotonic() >= deadline:
            raise DeadlinePassed(f"the receiver did not answer within {timeout:g} s") from exc
        raise
    finally:
        timer.cancel()
        connection.close()
