"""STARTTLS is required on `smtp://` unless the URL says `starttls=off` (alerting/smtp.py), against a real
SMTP server on loopback (tests/smtp_server.py): one that offers no STARTTLS gets nothing, neither the login
nor the message, and the outcome the alerting role records says `tls`."""

from __future__ import annotations

from email.message import EmailMessage

import pytest
import trustme

from alerting.smtp import Server, send, server_of
from infra.webhook_url import tls_context
from tests.smtp_server import smtp_server

TIMEOUT_S = 5.0


def mail(to: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "alerts@callscreen.test"
    message["To"] = to
    message["Subject"] = "An alert"
    message.set_content("caller over rate")
    return message


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.mark.parametrize(
    ("url", "tls", "starttls", "port"),
    [
        ("smtp://mail.example", False, True, 587),
        ("smtp://u:p@mail.example:25", False, True, 25),
        ("smtp://mail.example?starttls=on", False, True, 587),
        # Only the one documented opt-out sends in clear; anything else still requires STARTTLS.
        ("smtp://mail.example:25?starttls=off", False, False, 25),
        ("smtp://mail.example?starttls=no", False, True, 587),
        ("smtps://mail.example", True, False, 465),
        ("smtps://mail.example?starttls=off", True, False, 465),
    ],
)
def test_the_url_says_how_the_connection_is_secured(url: str, tls: bool, starttls: bool, port: int) -> None:
    server = server_of(url)
    assert server is not None
    assert (server.tls, server.starttls, server.port) == (tls, starttls, port)


async def test_a_server_without_starttls_gets_nothing_unless_the_url_opts_out() -> None:
    async with smtp_server() as plain:
        server = server_of(f"smtp://alerts:hunter2@127.0.0.1:{plain.port}")
        assert server is not None and server.starttls
        answered = await send(server, mail("ops@owner.test"), TIMEOUT_S)
        # The fields of the `channel.outcome` record: delivered, status, error.
        assert (answered.ok, answered.status, answered.error) == (False, None, "tls")
        assert (plain.logins, plain.senders, plain.received) == ([], [], [])
        # The same server, and a URL that says to send in clear.
        assert plain.url.endswith("?starttls=off")
        opted_out = server_of(plain.url.replace("smtp://", "smtp://alerts:hunter2@"))
        assert opted_out is not None and not opted_out.starttls
        answered = await send(opted_out, mail("ops@owner.test"), TIMEOUT_S)
    assert (answered.ok, answered.status, answered.error) == (True, 250, None)
    assert plain.logins == [("alerts", False)]
    assert [(m.to, m.tls) for m in plain.received] == [(["ops@owner.test"], False)]


async def test_a_starttls_server_gets_the_login_and_the_message_under_tls(ca: trustme.CA) -> None:
    with ca.cert_pem.tempfile() as ca_file:
        context = tls_context(ca_file)
    async with smtp_server(ca) as secured:
        server = server_of(secured.url.replace("smtp://", "smtp://alerts:hunter2@"))
        assert server is not None and server.starttls
        answered = await send(server, mail("ops@owner.test"), TIMEOUT_S, context)
    assert (answered.ok, answered.status, answered.error) == (True, 250, None)
    assert secured.logins == [("alerts", True)]
    assert secured.senders == [("alerts@callscreen.test", True)]
    assert [(m.to, m.tls) for m in secured.received] == [(["ops@owner.test"], True)]


async def test_a_certificate_that_does_not_verify_gets_nothing(ca: trustme.CA) -> None:
    """The deployment does not trust the server's CA: the handshake fails before the login."""
    async with smtp_server(ca) as secured:
        server = server_of(secured.url.replace("smtp://", "smtp://alerts:hunter2@"))
        assert server is not None
        answered = await send(server, mail("ops@owner.test"), TIMEOUT_S, tls_context(""))
    assert (answered.ok, answered.status, answered.error) == (False, None, "tls")
    assert (secured.logins, secured.senders, secured.received) == ([], [], [])


async def test_a_server_built_by_hand_requires_starttls_by_default() -> None:
    async with smtp_server() as plain:
        answered = await send(Server("127.0.0.1", plain.port, False, None, None), mail("a@b.test"), TIMEOUT_S)
    assert (answered.ok, answered.error) == (False, "tls")
    assert plain.received == []
