//! mTLS on real sockets: a tonic server on 127.0.0.1 with the coordinator's TLS config, and clients with
//! good, missing, foreign and expired certificates. The server's GetStatus answers with the identity it
//! derived from the peer certificate, which is what every authorization decision will rest on.

use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use ferry::grpc::certs::{self, Ca, CertsSpec, Validity};
use ferry::grpc::identity::{Role, identity_from_chain};
use ferry::grpc::proto::federation_client::FederationClient;
use ferry::grpc::proto::federation_server::{Federation, FederationServer};
use ferry::grpc::proto::{
    AgentMessage, CoordinatorMessage, GetStatusRequest, GetStatusResponse, PlanRequest, PlanResponse,
};
use ferry::grpc::tls::{TlsFiles, client_tls_config, server_tls_config};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_stream::Stream;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};

const TD: &str = "ferry.local";

/// Only GetStatus does anything: it reports who the caller is, as seen from its certificate.
struct EchoIdentity;

#[tonic::async_trait]
impl Federation for EchoIdentity {
    type SessionStream = Pin<Box<dyn Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

    async fn session(&self, _: Request<Streaming<AgentMessage>>) -> Result<Response<Self::SessionStream>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn get_status(&self, request: Request<GetStatusRequest>) -> Result<Response<GetStatusResponse>, Status> {
        let certs = request.peer_certs();
        let role = identity_from_chain(certs.as_deref().map(Vec::as_slice), TD)
            .map_err(|e| Status::unauthenticated(e.to_string()))?;
        Ok(Response::new(GetStatusResponse { caller: role.to_string(), ..Default::default() }))
    }

    async fn plan(&self, _: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

struct Coordinator {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Coordinator {
    async fn start(pki: &Path) -> Coordinator {
        let files = TlsFiles {
            ca: pki.join(certs::CA_CERT),
            cert: pki.join(certs::COORDINATOR_CERT),
            key: pki.join(certs::COORDINATOR_KEY),
        };
        let tls = server_tls_config(&files).expect("server tls");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let server =
            Server::builder().tls_config(tls).expect("tls config").add_service(FederationServer::new(EchoIdentity));
        let task = tokio::spawn(server.serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            let _ = stopped.await;
        }));
        Coordinator { addr, stop: Some(stop), task }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(5), self.task).await;
        assert!(matches!(result, Ok(Ok(Ok(())))), "server ended badly: {result:?}");
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
    let a = get_status(coordinator.addr, client(dir.path(), "cluster-a.pem", "cluster-a-key.pem")).await;
    assert_eq!(a, Ok(Role::Agent { cluster: "a".into() }.to_string()));
    let b = get_status(coordinator.addr, client(dir.path(), "cluster-b.pem", "cluster-b-key.pem")).await;
    assert_eq!(b.as_deref(), Ok("cluster/b"));
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
