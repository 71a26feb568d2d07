//! mTLS on real sockets: the coordinator on 127.0.0.1, and clients with good, missing, foreign and expired
//! certificates. GetStatus answers an operator with the identity derived from its certificate, and refuses an
//! agent by name — the identity every authorization decision rests on.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use ferry::config::LoadedConfig;
use ferry::coordinator::{self, Settings, Transport};
use ferry::grpc::certs::{self, Ca, CertsSpec, Validity};
use ferry::grpc::coordinator_identity::CoordinatorIdentity;
use ferry::grpc::identity::Role;
use ferry::grpc::proto::GetStatusRequest;
use ferry::grpc::proto::federation_client::FederationClient;
use ferry::grpc::revocation::RevocationFile;
use ferry::grpc::tls::{TlsFiles, client_tls_config};
use ferry::grpc::tls_acceptor::ReloadingTls;
use tokio::net::TcpListener;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

const TD: &str = "ferry.local";

struct Coordinator {
    addr: SocketAddr,
    running: ferry::coordinator::RunningCoordinator,
}

impl Coordinator {
    /// The real coordinator (no locations; clusters a and b) with the PKI's server certificate.
    async fn start(pki: &Path) -> Coordinator {
        Self::start_with(pki, Settings::default()).await
    }

    async fn start_with(pki: &Path, settings: Settings) -> Coordinator {
        Self::start_revoking(pki, settings, None).await
    }

    /// With a revocation list at `revoked` (identities of trust domain TD).
    async fn start_revoking(pki: &Path, settings: Settings, revoked: Option<&Path>) -> Coordinator {
        let files = TlsFiles {
            ca: pki.join(certs::CA_CERT),
            cert: pki.join(certs::COORDINATOR_CERT),
            key: pki.join(certs::COORDINATOR_KEY),
        };
        let revocation = revoked.map(|path| RevocationFile { path: path.to_owned(), trust_domain: TD.into() });
        let tls = std::sync::Arc::new(ReloadingTls::with_revocation_list(files, revocation).expect("server tls"));
        let config_path = pki.join("ferry.yaml");
        std::fs::write(&config_path, "locations: []\nclusters: [{name: a}, {name: b}]\n").expect("config");
        let config = LoadedConfig::load(&config_path).expect("config");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let transport = Transport::Mtls { tls, trust_domain: TD.into() };
        let running = coordinator::start(&config, settings, listener, transport).await.expect("start");
        Coordinator { addr: running.addr, running }
    }

    async fn stop(self) {
        self.running.shutdown().await.expect("clean shutdown");
    }
}

/// Connects and calls GetStatus; Ok(caller identity) or Err(what failed, for the assertion message).
async fn get_status(addr: SocketAddr, tls: ClientTlsConfig) -> Result<String, String> {
    let endpoint = Endpoint::from_shared(format!("https://{addr}"))
        .map_err(|e| format!("endpoint: {e}"))?
        .tls_config(tls)
        .map_err(|e| format!("tls: {e}"))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.map_err(|e| format!("connect: {e:?}"))?;
    FederationClient::new(channel)
        .get_status(GetStatusRequest::default())
        .await
        .map(|r| r.into_inner().caller)
        .map_err(|s| format!("rpc: {s:?}"))
}

fn client(pki: &Path, cert: &str, key: &str) -> ClientTlsConfig {
    let files = TlsFiles { ca: pki.join(certs::CA_CERT), cert: pki.join(cert), key: pki.join(key) };
    // The coordinator certificate has localhost and 127.0.0.1; name it explicitly so the check is not left to
    // how an IP-address URI is mapped to a server name.
    client_tls_config(&files, Some("localhost")).expect("client tls")
}

fn make_pki(dir: &Path, clusters: &[&str], operators: &[&str]) {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    certs::write_all(&CertsSpec {
        out: dir.to_owned(),
        trust_domain: TD.into(),
        clusters: clusters.iter().map(|s| s.to_string()).collect(),
        operators: operators.iter().map(|s| s.to_string()).collect(),
        coordinator_sans: vec![],
        validity: Validity::days_from_now(1),
    })
    .expect("pki");
}

/// A refused handshake surfaces either at connect or at the first rpc (with TLS 1.3 the client finishes its
/// side before the server has checked the client certificate); either way the rpc must not succeed, and the
/// failure must be the server's TLS alert (one of `alerts`), not an answer from the service.
fn assert_refused(result: Result<String, String>, why: &str, alerts: &[&str]) {
    match result {
        Ok(caller) => panic!("{why}: the server accepted the call as {caller:?}"),
        Err(e) => {
            assert!(!e.contains("Unauthenticated"), "{why}: reached the service instead of failing TLS: {e}");
            assert!(
                alerts.iter().any(|a| e.contains(&format!("received fatal alert: {a}"))),
                "{why}: expected one of the alerts {alerts:?}, got {e}"
            );
        }
    }
}

#[tokio::test]
async fn agent_and_operator_certificates_are_recognized() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &["a", "b"], &["admin"]);
    let coordinator = Coordinator::start(dir.path()).await;
    // Agents are recognized as their cluster, and GetStatus is not theirs to call.
    let a = get_status(coordinator.addr, client(dir.path(), "cluster-a.pem", "cluster-a-key.pem")).await;
    let a = a.expect_err("agents may not read status");
    assert!(a.contains("PermissionDenied") && a.contains("cluster/a may not call GetStatus"), "{a}");
    let b = get_status(coordinator.addr, client(dir.path(), "cluster-b.pem", "cluster-b-key.pem")).await;
    assert!(b.expect_err("denied").contains("cluster/b may not call GetStatus"));
    let admin = get_status(coordinator.addr, client(dir.path(), "operator-admin.pem", "operator-admin-key.pem")).await;
    assert_eq!(admin.as_deref(), Ok("operator/admin"));
    coordinator.stop().await;
}

#[tokio::test]
async fn no_client_certificate_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &[], &[]);
    let coordinator = Coordinator::start(dir.path()).await;
    let ca = std::fs::read(dir.path().join(certs::CA_CERT)).expect("ca");
    let no_identity = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)).domain_name("localhost");
    assert_refused(get_status(coordinator.addr, no_identity).await, "no client certificate", &["CertificateRequired"]);
    coordinator.stop().await;
}

#[tokio::test]
async fn certificate_from_another_ca_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &[], &[]);
    // Same trust domain and cluster name, different CA: only the signature tells them apart.
    make_pki(other.path(), &["a"], &[]);
    let coordinator = Coordinator::start(dir.path()).await;
    let files = TlsFiles {
        ca: dir.path().join(certs::CA_CERT), // trusts the right server, presents the foreign client cert
        cert: other.path().join("cluster-a.pem"),
        key: other.path().join("cluster-a-key.pem"),
    };
    let tls = client_tls_config(&files, Some("localhost")).expect("client tls");
    assert_refused(
        get_status(coordinator.addr, tls).await,
        "certificate from another CA",
        // Both CAs have the same subject name, so webpki finds the "issuer" and the signature check fails
        // (DecryptError); with distinct names it would be UnknownCA.
        &["DecryptError", "UnknownCA", "BadCertificate"],
    );
    coordinator.stop().await;
}

#[tokio::test]
async fn expired_certificate_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &[], &[]);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("read");
    let ca = Ca::from_pem(&read(certs::CA_CERT), &read(certs::CA_KEY)).expect("ca");
    let now = SystemTime::now();
    let expired = Validity { not_before: now - Duration::from_secs(7200), not_after: now - Duration::from_secs(3600) };
    let issued = ca.client_cert(TD, &Role::Agent { cluster: "a".into() }, expired).expect("expired cert");
    std::fs::write(dir.path().join("expired.pem"), issued.cert_pem).expect("write");
    std::fs::write(dir.path().join("expired-key.pem"), issued.key_pem).expect("write");

    let coordinator = Coordinator::start(dir.path()).await;
    assert_refused(
        get_status(coordinator.addr, client(dir.path(), "expired.pem", "expired-key.pem")).await,
        "expired",
        &["CertificateExpired"],
    );
    coordinator.stop().await;
}

#[tokio::test]
async fn same_ca_but_foreign_trust_domain_reaches_the_service_and_is_unauthenticated() {
    // TLS alone accepts it (same CA); the identity check is what refuses it, so both layers are needed.
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &[], &[]);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("read");
    let ca = Ca::from_pem(&read(certs::CA_CERT), &read(certs::CA_KEY)).expect("ca");
    let issued = ca
        .client_cert("other.example", &Role::Agent { cluster: "a".into() }, Validity::days_from_now(1))
        .expect("cert");
    std::fs::write(dir.path().join("foreign.pem"), issued.cert_pem).expect("write");
    std::fs::write(dir.path().join("foreign-key.pem"), issued.key_pem).expect("write");

    let coordinator = Coordinator::start(dir.path()).await;
    let result = get_status(coordinator.addr, client(dir.path(), "foreign.pem", "foreign-key.pem")).await;
    let err = result.expect_err("foreign trust domain must not be accepted");
    assert!(err.contains("Unauthenticated") && err.contains("other.example"), "{err}");
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificate_files_are_used_without_a_restart_on_both_sides() {
    let live = tempfile::tempdir().expect("tempdir");
    let before = tempfile::tempdir().expect("tempdir");
    let after = tempfile::tempdir().expect("tempdir");
    make_pki(live.path(), &["a"], &["admin"]);
    make_pki(after.path(), &["a"], &["admin"]);
    for entry in std::fs::read_dir(live.path()).expect("dir") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, before.path().join(path.file_name().expect("name"))).expect("copy");
    }
    // Connections live 2 s here, so the agent's stream is renewed soon after the rotation.
    let settings = Settings { max_connection_age: Duration::from_secs(2), ..Settings::default() };
    let coordinator = Coordinator::start_with(live.path(), settings).await;

    // The agent reads its files on every connect (as `ferry agent` does).
    let files = TlsFiles {
        ca: live.path().join(certs::CA_CERT),
        cert: live.path().join("cluster-a.pem"),
        key: live.path().join("cluster-a-key.pem"),
    };
    let mut config = ferry::agent::client::AgentConfig::new(
        format!("https://{}", coordinator.addr),
        Some(client_tls_config(&files, Some("localhost")).expect("tls")),
    );
    config.tls_files = Some((files, Some("localhost".into())));
    config.heartbeat_interval = Duration::from_millis(200);
    config.backoff = ferry::grpc::backoff::Backoff::new(Duration::from_millis(50), Duration::from_millis(200));
    let agent = ferry::agent::client::AgentClient::spawn(config, Vec::new());
    let mut link = agent.link();
    tokio::time::timeout(Duration::from_secs(10), link.wait_for(|l| l.connected))
        .await
        .expect("connects")
        .expect("link");

    // cert-manager renews: a new CA and new certificates are written over the old files, in place.
    for name in [certs::CA_CERT, certs::COORDINATOR_CERT, certs::COORDINATOR_KEY, "cluster-a.pem", "cluster-a-key.pem"]
    {
        std::fs::write(live.path().join(name), std::fs::read(after.path().join(name)).expect("read")).expect("write");
    }
    // New handshakes use the new files: the old PKI is refused, the new one is served.
    let old = get_status(coordinator.addr, client(before.path(), "operator-admin.pem", "operator-admin-key.pem")).await;
    assert!(old.is_err(), "the server still trusted the old CA: {old:?}");
    let new = get_status(coordinator.addr, client(after.path(), "operator-admin.pem", "operator-admin-key.pem")).await;
    assert_eq!(new.as_deref(), Ok("operator/admin"), "the server did not pick up the new files");

    // The agent's stream reaches its maximum age, and it reconnects with its renewed files (with the ones it
    // read at start it could not: the coordinator now trusts only the new CA).
    let reconnected = tokio::time::timeout(Duration::from_secs(20), link.wait_for(|l| l.connected && l.connects >= 2));
    let reconnected = reconnected.await.unwrap_or_else(|_| panic!("no reconnect: {:?}", agent.link().borrow().clone()));
    let connects = reconnected.expect("link").connects;
    assert!(connects >= 2, "{connects}");
    agent.shutdown().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_dropped_at_the_handshake_deadline_and_connections_are_capped() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &[], &["admin"]);
    let settings =
        Settings { tls_handshake_timeout: Duration::from_millis(500), max_connections: 2, ..Settings::default() };
    let coordinator = Coordinator::start_with(dir.path(), settings).await;
    let admin = || client(dir.path(), "operator-admin.pem", "operator-admin-key.pem");

    // Two peers connect and say nothing: they hold both slots until the deadline.
    let mut silent_1 = tokio::net::TcpStream::connect(coordinator.addr).await.expect("connect");
    let mut silent_2 = tokio::net::TcpStream::connect(coordinator.addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let blocked = tokio::time::timeout(Duration::from_millis(300), get_status(coordinator.addr, admin())).await;
    assert!(blocked.is_err(), "a third connection was served while two slots were held: {blocked:?}");

    // At the deadline the server drops them (EOF on their side), and the slots serve others again.
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), silent_1.read(&mut buf)).await.expect("dropped in time");
    assert_eq!(read.expect("read"), 0, "the server closed the silent connection");
    assert!(started.elapsed() < Duration::from_secs(2), "dropped after {:?}", started.elapsed());
    let _ = silent_2.read(&mut buf).await;
    let served = get_status(coordinator.addr, admin()).await;
    assert_eq!(served.as_deref(), Ok("operator/admin"));
    coordinator.stop().await;
}

/// An agent of cluster `name` from the PKI in `pki`, reading its files on every connect (as `ferry agent` does).
fn spawn_agent(addr: SocketAddr, pki: &Path, name: &str) -> ferry::agent::client::AgentClient {
    spawn_agent_requiring(addr, pki, name, CoordinatorIdentity::Any)
}

/// [`spawn_agent`], requiring `identity` of the coordinator's certificate.
fn spawn_agent_requiring(
    addr: SocketAddr,
    pki: &Path,
    name: &str,
    identity: CoordinatorIdentity,
) -> ferry::agent::client::AgentClient {
    let files = TlsFiles {
        ca: pki.join(certs::CA_CERT),
        cert: pki.join(format!("cluster-{name}.pem")),
        key: pki.join(format!("cluster-{name}-key.pem")),
    };
    let mut config = ferry::agent::client::AgentConfig::new(
        format!("https://{addr}"),
        Some(client_tls_config(&files, Some("localhost")).expect("tls")),
    );
    config.tls_files = Some((files, Some("localhost".into())));
    config.coordinator_identity = identity;
    config.heartbeat_interval = Duration::from_millis(200);
    // Slow reconnects, so the reason the stream ended stays in the link long enough to be read.
    config.backoff = ferry::grpc::backoff::Backoff::new(Duration::from_secs(3), Duration::from_secs(3));
    ferry::agent::client::AgentClient::spawn(config, Vec::new())
}

/// Completes a TLS handshake with `cert`/`key` and reads without sending anything: the server's verdict on the
/// client certificate arrives as an alert (TLS 1.3 sends it after the client finished), or the read waits for
/// data because the certificate was accepted. Deterministic, unlike an rpc that may race the alert with its write.
async fn handshake_verdict(addr: SocketAddr, pki: &Path, cert: &str, key: &str) -> String {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::AsyncReadExt;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(pki.join(certs::CA_CERT)).expect("ca") {
        roots.add(ca.expect("ca")).expect("root");
    }
    let chain: Vec<_> =
        CertificateDer::pem_file_iter(pki.join(cert)).expect("cert").map(|c| c.expect("cert")).collect();
    let key = PrivateKeyDer::from_pem_file(pki.join(key)).expect("key");
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("client auth");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("tcp");
    let mut tls = match connector.connect(ServerName::try_from("localhost").expect("name"), tcp).await {
        Ok(tls) => tls,
        Err(e) => return format!("handshake: {e}"),
    };
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(2), tls.read(&mut buf)).await {
        Ok(Ok(n)) => format!("accepted: read {n} bytes"),
        Ok(Err(e)) => format!("refused: {e}"),
        Err(_) => "accepted: no alert".into(),
    }
}

fn metrics(coordinator: &Coordinator) -> String {
    let status = coordinator.running.hub.status(None, SystemTime::now()).expect("status");
    coordinator.running.hub.telemetry.render(&status).expect("render")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_agent_is_refused_and_an_edit_of_the_list_ends_an_open_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &["a", "b"], &[]);
    let revoked = dir.path().join("revoked.txt");
    std::fs::write(&revoked, "# stolen on 2026-12-01\nspiffe://ferry.local/cluster/b\n").expect("write");
    let coordinator = Coordinator::start_revoking(dir.path(), Settings::default(), Some(&revoked)).await;

    // The allowed agent connects and holds its stream.
    let agent_a = spawn_agent(coordinator.addr, dir.path(), "a");
    let mut link_a = agent_a.link();
    tokio::time::timeout(Duration::from_secs(10), link_a.wait_for(|l| l.connected))
        .await
        .expect("a connects")
        .expect("link");

    // The denied one never gets past the handshake, whatever it calls.
    let verdict = handshake_verdict(coordinator.addr, dir.path(), "cluster-b.pem", "cluster-b-key.pem").await;
    assert!(verdict.contains("CertificateRevoked"), "revoked cluster b: {verdict}");
    assert!(get_status(coordinator.addr, client(dir.path(), "cluster-b.pem", "cluster-b-key.pem")).await.is_err());
    let verdict = handshake_verdict(coordinator.addr, dir.path(), "cluster-a.pem", "cluster-a-key.pem").await;
    assert!(verdict.starts_with("accepted"), "cluster a: {verdict}");
    let page = metrics(&coordinator);
    // Counted per refused handshake (the rpc's channel may try more than once).
    assert!(page.contains(r#"ferry_revoked_refusals_total{identity="cluster/b",at="handshake"} "#), "{page}");

    // The operator revokes a too: the file is edited in place, the coordinator is not restarted. Within the
    // reload poll a's open stream is ended with the reason, and its next handshake is refused.
    std::fs::write(&revoked, "spiffe://ferry.local/cluster/b\nspiffe://ferry.local/cluster/a\n").expect("write");
    let ended = tokio::time::timeout(Duration::from_secs(10), link_a.wait_for(|l| !l.connected)).await;
    let ended = ended.expect("a's open stream was not ended").expect("link").clone();
    let reason = ended.last_error.unwrap_or_default();
    assert!(reason.contains("cluster/a") && reason.contains("revoked"), "{reason}");
    let verdict = handshake_verdict(coordinator.addr, dir.path(), "cluster-a.pem", "cluster-a-key.pem").await;
    assert!(verdict.contains("CertificateRevoked"), "cluster a after the edit: {verdict}");
    let page = metrics(&coordinator);
    assert!(page.contains(r#"ferry_revoked_refusals_total{identity="cluster/a",at="stream"} 1"#), "{page}");
    agent_a.shutdown().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_serial_refuses_that_certificate_only_even_on_a_connection_opened_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &[], &["admin"]);
    let revoked = dir.path().join("revoked.txt");
    std::fs::write(&revoked, "").expect("write");
    let coordinator = Coordinator::start_revoking(dir.path(), Settings::default(), Some(&revoked)).await;

    // A connection opened while the certificate was still good.
    let endpoint = Endpoint::from_shared(format!("https://{}", coordinator.addr))
        .expect("endpoint")
        .tls_config(client(dir.path(), "operator-admin.pem", "operator-admin-key.pem"))
        .expect("tls");
    let mut open = FederationClient::new(endpoint.connect().await.expect("connect"));
    let caller = open.get_status(GetStatusRequest::default()).await.expect("allowed").into_inner().caller;
    assert_eq!(caller, "operator/admin");

    // Revoke that one certificate by its serial, as `openssl x509 -noout -serial` prints it.
    let pem = std::fs::read(dir.path().join("operator-admin.pem")).expect("read");
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).expect("pem");
    let serial = pem.parse_x509().expect("x509").tbs_certificate.raw_serial_as_string().replace(':', "");
    std::fs::write(&revoked, format!("serial={}\n", serial.to_uppercase())).expect("write");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // New handshakes are refused, and so are new calls on the connection that was already open.
    let verdict = handshake_verdict(coordinator.addr, dir.path(), "operator-admin.pem", "operator-admin-key.pem").await;
    assert!(verdict.contains("CertificateRevoked"), "revoked serial: {verdict}");
    let again = open.get_status(GetStatusRequest::default()).await.expect_err("revoked on the open connection");
    assert_eq!(again.code(), tonic::Code::PermissionDenied, "{again:?}");
    assert!(again.message().contains("operator/admin") && again.message().contains("revoked"), "{again:?}");

    // A new certificate for the same identity is another serial: accepted.
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("read");
    let ca = Ca::from_pem(&read(certs::CA_CERT), &read(certs::CA_KEY)).expect("ca");
    let renewed =
        ca.client_cert(TD, &Role::Operator { name: "admin".into() }, Validity::days_from_now(1)).expect("cert");
    std::fs::write(dir.path().join("renewed.pem"), renewed.cert_pem).expect("write");
    std::fs::write(dir.path().join("renewed-key.pem"), renewed.key_pem).expect("write");
    let served = get_status(coordinator.addr, client(dir.path(), "renewed.pem", "renewed-key.pem")).await;
    assert_eq!(served.as_deref(), Ok("operator/admin"));
    let page = metrics(&coordinator);
    assert!(page.contains(r#"ferry_revoked_refusals_total{identity="operator/admin",at="rpc"} 1"#), "{page}");
    coordinator.stop().await;
}

#[tokio::test]
async fn a_broken_revocation_list_stops_the_start_and_a_broken_edit_keeps_the_previous_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path(), &["a"], &[]);
    let revoked = dir.path().join("revoked.txt");
    std::fs::write(&revoked, "cluster/a\n").expect("write");
    let files = TlsFiles {
        ca: dir.path().join(certs::CA_CERT),
        cert: dir.path().join(certs::COORDINATOR_CERT),
        key: dir.path().join(certs::COORDINATOR_KEY),
    };
    let revocation = RevocationFile { path: revoked.clone(), trust_domain: TD.into() };
    let err = ReloadingTls::with_revocation_list(files.clone(), Some(revocation.clone())).err().expect("refused");
    assert!(err.to_string().contains("revoked.txt:1"), "{err}");

    std::fs::write(&revoked, "spiffe://ferry.local/cluster/a\n").expect("write");
    let coordinator = Coordinator::start_revoking(dir.path(), Settings::default(), Some(&revoked)).await;
    // A typo in an edit must not un-revoke anyone: the previous list stays in force.
    std::fs::write(&revoked, "spiffe://ferry.local/cluster/a\ntypo\n").expect("write");
    let verdict = handshake_verdict(coordinator.addr, dir.path(), "cluster-a.pem", "cluster-a-key.pem").await;
    assert!(verdict.contains("CertificateRevoked"), "still revoked after a broken edit: {verdict}");
    coordinator.stop().await;
}

/// Waits until the agent is connected (Ok) or has failed a connect (Err with the reason).
async fn first_outcome(agent: &ferry::agent::client::AgentClient) -> Result<(), String> {
    let mut link = agent.link();
    let outcome =
        tokio::time::timeout(Duration::from_secs(10), link.wait_for(|l| l.connected || l.last_error.is_some()));
    let link = outcome.await.expect("neither connected nor failed").expect("link").clone();
    if link.connected { Ok(()) } else { Err(link.last_error.unwrap_or_default()) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_agent_accepts_only_a_server_certificate_naming_the_coordinator() {
    let pki = tempfile::tempdir().expect("tempdir");
    make_pki(pki.path(), &["a"], &[]);
    // A rogue server: a certificate from the same CA for the very name the agents dial, but not the
    // coordinator's (what any other service of a shared Issuer could hold).
    let rogue = tempfile::tempdir().expect("tempdir");
    for name in [certs::CA_CERT, certs::CA_KEY] {
        std::fs::copy(pki.path().join(name), rogue.path().join(name)).expect("copy");
    }
    let read = |name: &str| std::fs::read_to_string(pki.path().join(name)).expect("read");
    let ca = Ca::from_pem(&read(certs::CA_CERT), &read(certs::CA_KEY)).expect("ca");
    let impostor = ca.server_cert(&["localhost".into(), "127.0.0.1".into()], Validity::days_from_now(1)).expect("cert");
    std::fs::write(rogue.path().join(certs::COORDINATOR_CERT), impostor.cert_pem).expect("write");
    std::fs::write(rogue.path().join(certs::COORDINATOR_KEY), impostor.key_pem).expect("write");
    let rogue_server = Coordinator::start(rogue.path()).await;

    // Strict (auto: spiffe://ferry.local/coordinator, from the agent's own trust domain): refused, with why.
    let strict = spawn_agent_requiring(rogue_server.addr, pki.path(), "a", CoordinatorIdentity::SameTrustDomain);
    let err = first_outcome(&strict).await.expect_err("the strict agent must not talk to the rogue server");
    assert!(err.contains("is not spiffe://ferry.local/coordinator"), "{err}");
    strict.shutdown().await;
    // The same agent without strict identity would have taken it for the coordinator: the gap this closes.
    let lax = spawn_agent(rogue_server.addr, pki.path(), "a");
    assert_eq!(first_outcome(&lax).await, Ok(()));
    lax.shutdown().await;
    rogue_server.stop().await;

    // A stolen agent certificate cannot serve as the coordinator either: it is client-only (and names no host).
    let agent_as_server = tempfile::tempdir().expect("tempdir");
    for (from, to) in [
        (certs::CA_CERT, certs::CA_CERT),
        ("cluster-a.pem", certs::COORDINATOR_CERT),
        ("cluster-a-key.pem", certs::COORDINATOR_KEY),
    ] {
        std::fs::copy(pki.path().join(from), agent_as_server.path().join(to)).expect("copy");
    }
    let impostor = Coordinator::start(agent_as_server.path()).await;
    let strict = spawn_agent_requiring(impostor.addr, pki.path(), "a", CoordinatorIdentity::SameTrustDomain);
    let err = first_outcome(&strict).await.expect_err("an agent certificate is not a server certificate");
    assert!(err.contains("invalid peer certificate"), "{err}");
    strict.shutdown().await;
    impostor.stop().await;

    // The real coordinator's certificate (from `ferry certs`) carries the URI: accepted, by auto and by the URI.
    let coordinator = Coordinator::start(pki.path()).await;
    let uri = CoordinatorIdentity::Uri("spiffe://ferry.local/coordinator".into());
    for identity in [CoordinatorIdentity::SameTrustDomain, uri] {
        let agent = spawn_agent_requiring(coordinator.addr, pki.path(), "a", identity.clone());
        assert_eq!(first_outcome(&agent).await, Ok(()), "{identity:?}");
        agent.shutdown().await;
    }
    // A URI the certificate does not carry is refused.
    let other = CoordinatorIdentity::Uri("spiffe://ferry.local/coordinator-eu".into());
    let agent = spawn_agent_requiring(coordinator.addr, pki.path(), "a", other);
    let err = first_outcome(&agent).await.expect_err("wrong URI");
    assert!(err.contains("coordinator-eu"), "{err}");
    agent.shutdown().await;
    coordinator.stop().await;
}
