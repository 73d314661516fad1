"""The broker policy, one function (``worker._broker.check_broker``) behind every entry point:
``tune()`` / ``resume()``, ``elastune run|resume`` and ``elastune worker``. A broker off this
machine needs a password and TLS (``rediss://``), one on loopback a password; anything else is
refused, naming ``broker_url`` (exit status 2), unless insecure is asked for. TLS verifies the
broker's certificate."""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
import socket
import ssl
import threading
from pathlib import Path

import pytest
import redis
import yaml

from cloud._bootstrap import startup_script
from cloud._provider import Bootstrap
from tests._redis_tcp import free_port, redis_on_loopback
from tuner import ConfigError, tune
from tuner._tune import resume
from tuner.cli import main
from worker import BrokerAddress, BrokerURLError, make_app
from worker._broker import check_broker

ROOT = Path(__file__).resolve().parents[2]
PW = "pw-" + secrets.token_hex(8)

ACCEPTED = [
    f"rediss://:{PW}@broker.example.com:6380/0",
    f"rediss://:{PW}@10.1.2.3:6380/2",
    f"redis://:{PW}@127.0.0.1:6379/0",
    f"redis://:{PW}@127.8.9.10:6379/0",
    f"redis://:{PW}@localhost/0",
    f"redis://:{PW}@[::1]:6379/0",
    f"rediss://:{PW}@localhost:6380/0",
    "unix:///run/redis/redis.sock",
    f"unix://:{PW}@/tmp/redis.sock",
    f"redis+socket://:{PW}@/tmp/redis.sock",
]
REFUSED = {
    f"redis://:{PW}@broker.example.com:6379/0": "TLS (rediss://),",
    f"redis://:{PW}@10.1.2.3:6379/0": "TLS (rediss://),",
    f"redis://:{PW}@[2001:db8::1]:6379/0": "TLS (rediss://),",
    "rediss://broker.example.com:6380/0": "a password,",
    "redis://broker.example.com:6379/0": "a password and TLS (rediss://),",
    "redis://127.0.0.1:6379/0": "a password,",
    "redis://localhost/0": "a password,",
}
SWEEP = {
    "name": "policy",
    "trainable": "tests.trainables:quadratic",
    "metric": "score",
    "mode": "max",
    "space": {"x": {"uniform": [0.0, 1.0]}},
    "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 3, "reduction_factor": 3},
    "num_trials": 3,
    "seed": 5,
    "provider": {"type": "local", "workers": 1},
}


def _redacted(url: str) -> str:
    """A test id without the password: the same on every run (and every xdist worker)."""
    return url.replace(PW, "PW")


@pytest.mark.parametrize("url", ACCEPTED, ids=_redacted)
def test_a_broker_with_a_password_and_tls_or_on_this_machine_is_accepted(url):
    check_broker(BrokerAddress.parse(url))


@pytest.mark.parametrize("url", sorted(REFUSED), ids=_redacted)
def test_a_plain_or_passwordless_tcp_broker_is_refused_unless_insecure(url, caplog):
    address = BrokerAddress.parse(url)
    with pytest.raises(BrokerURLError) as err:
        check_broker(address)
    message = str(err.value)
    assert message.startswith("broker_url: ") and f"needs {REFUSED[url]}" in message
    assert address.redacted in message and PW not in message and "--insecure" in message
    check_broker(address, insecure=True)
    assert address.redacted in caplog.text and PW not in caplog.text


def test_malformed_urls_are_refused_without_repeating_them():
    for url in (f"redis://{PW}@broker.example.com:6379/0",     # the colon forgotten
                f"redis://:{PW}@host:port/0", f"redis://:{PW}@host:6379/db",
                f"http://:{PW}@host/0"):
        with pytest.raises(BrokerURLError) as err:
            BrokerAddress.parse(url)
        assert str(err.value).startswith("broker_url: ") and PW not in str(err.value)


def test_tune_and_resume_refuse_before_anything_is_started(tmp_path):
    url = f"redis://:{PW}@broker.example.com:6379/0"
    with pytest.raises(ConfigError) as err:
        tune(SWEEP, time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp",
             broker_url=url)
    assert err.value.field == "broker_url" and PW not in str(err.value)
    assert not (tmp_path / "exp").exists()
    with pytest.raises(ConfigError) as err:
        resume(tmp_path / "exp", broker_url=url)
    assert err.value.field == "broker_url"


@pytest.mark.parametrize("command", ["run", "resume", "worker"])
def test_the_cli_refuses_with_status_2_naming_broker_url(command, tmp_path, capsys,
                                                         monkeypatch):
    monkeypatch.delenv("ELASTUNE_BROKER_URL", raising=False)
    monkeypatch.syspath_prepend(str(ROOT))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({**SWEEP, "budget": {"time": "1m"}}))
    target = {"run": str(sweep), "resume": str(tmp_path / "exp"), "worker": None}[command]
    for url in (f"redis://:{PW}@broker.example.com:6379/0", "redis://127.0.0.1:6379/0"):
        argv = [command, *([target] if target else []), "--broker", url]
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert "broker_url" in err and "--insecure" in err and PW not in out + err
    assert not (tmp_path / "exp").exists()


@pytest.mark.slow
def test_insecure_lets_a_passwordless_broker_through_to_the_workers_too(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    with redis_on_loopback(None) as port:
        url = f"redis://127.0.0.1:{port}/0"
        with pytest.raises(ConfigError):
            tune(SWEEP, time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "no",
                 broker_url=url)
        # The local workers are started with --insecure too, or they would refuse it.
        result = tune(SWEEP, time_budget="1m", cost_budget=None,
                      experiment_dir=tmp_path / "exp", broker_url=url, insecure_broker=True)
    assert result.state == "finished" and result.trials.shape[0] == 3


def test_a_vm_is_told_insecure_only_when_the_user_said_so():
    boot = Bootstrap(broker_url="redis://10.0.0.5:6379/0", secret_name="/elastune/e/broker",
                     storage_uri="s3://b/e")
    assert "--insecure" not in startup_script(boot, "aws")
    insecure = Bootstrap(broker_url="redis://10.0.0.5:6379/0",
                         secret_name="/elastune/e/broker", storage_uri="s3://b/e",
                         insecure_broker=True)
    assert "--slots 1 --insecure " in startup_script(insecure, "aws")


# -- TLS: rediss:// is verified, and works ----------------------------------------------------

def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost / 127.0.0.1 (the CA a test trusts)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "broker.crt", folder / "broker.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class _TlsProxy:
    """TLS in front of a plain Redis port, as a managed Redis or stunnel would be."""

    def __init__(self, backend_port: int, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.backend_port = backend_port
        self.port = free_port()
        self.sock = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()   # the client did not trust us: what the test wants to see
            return
        backend = socket.create_connection(("127.0.0.1", self.backend_port))

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pipe, args=(backend, tls), daemon=True).start()
        pipe(tls, backend)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.slow
def test_rediss_verifies_the_broker_certificate_and_runs_a_sweep(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    assert make_app(BrokerAddress.parse(f"rediss://:{PW}@broker.example.com:6380/0")
                    ).conf.broker_use_ssl == {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    cert, key = _certificate(tmp_path)
    with redis_on_loopback(PW) as port:
        proxy = _TlsProxy(port, cert, key)
        try:
            address = BrokerAddress.parse(f"rediss://:{PW}@localhost:{proxy.port}/0")
            # An unknown certificate is refused by redis-py and by kombu alike.
            monkeypatch.delenv("SSL_CERT_FILE", raising=False)
            with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                address.client().ping()
            with make_app(address).connection_for_write() as conn, pytest.raises(Exception) \
                    as err:
                conn.ensure_connection(max_retries=1)
            assert "CERTIFICATE_VERIFY_FAILED" in repr(err.value) + repr(err.value.__cause__)
            # Trusted (the private CA named as usual), a sweep runs over TLS end to end.
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))
            assert address.client().ping()
            result = tune(SWEEP, time_budget="1m", cost_budget=None,
                          experiment_dir=tmp_path / "exp", broker_url=address.url)
        finally:
            proxy.close()
    assert result.state == "finished" and result.trials.shape[0] == 3
