//! The Helm chart (deploy/helm/ferry) with every values example under deploy/helm/ferry/examples/ (and the chart's
//! defaults): `helm lint --strict`, `helm template`, checks on what renders (HA pieces, optional kinds only when
//! enabled, the agent certificate's URI SAN as src/grpc/identity.rs reads it), values the schema or the templates
//! must refuse, and a server-side dry run of every rendered object with strict field validation on the test bed's
//! real kube-apiserver, with the upstream CRDs of ServiceMonitor, PrometheusRule and Certificate installed.
//!
//! helm (pinned, built from the Go module proxy) and those CRDs come from e2e/testbed/build-helm.sh. Without them
//! the tests skip with a message, unless FERRY_REQUIRE_BED is set (e2e/test sets it): then they are built, and a
//! build failure fails the tests. The dry-run test starts the bed: run it under `flock /tmp/ferry-bed.lock`.

#[path = "e2e_support/mod.rs"]
mod e2e;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use e2e::*;
use ferry::config::LoadedConfig;
use ferry::grpc::identity::{Role, parse_identity};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use serde_json::{Value, json};

const RELEASE: &str = "ferry";
const NAMESPACE: &str = "ferry";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("deploy/helm/ferry")
}

/// helm and the optional kinds' CRDs, as e2e/testbed/build-helm.sh reports them.
struct Helm {
    bin: PathBuf,
    crds_dir: PathBuf,
}

impl Helm {
    /// `None` (the caller skips) only when they are not built and FERRY_REQUIRE_BED is unset; with it set, they
    /// are built (cached after the first time) and a failure panics.
    fn find() -> Option<Self> {
        let script = root().join("e2e/testbed/build-helm.sh");
        let required = std::env::var_os("FERRY_REQUIRE_BED").is_some();
        let mut command = Command::new(&script);
        if !required {
            command.arg("--cached");
        }
        let out = command.output().unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        if !out.status.success() {
            assert!(
                !required,
                "FERRY_REQUIRE_BED is set and {} failed:\n{}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!(
                "SKIPPED: helm is not built (e2e/testbed/build-helm.sh builds it, ~4 min; or set FERRY_REQUIRE_BED=1 \
                 to build it here and fail instead of skipping)"
            );
            return None;
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let vars: HashMap<&str, &str> = stdout.lines().filter_map(|l| l.split_once('=')).collect();
        let var = |key: &str| PathBuf::from(vars.get(key).unwrap_or_else(|| panic!("{key} not in:\n{stdout}")));
        let helm = Self { bin: var("FERRY_TESTBED_HELM"), crds_dir: var("FERRY_TESTBED_CHART_CRDS_DIR") };
        assert!(helm.bin.is_file(), "{} is not a file", helm.bin.display());
        Some(helm)
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.bin).args(args).output().unwrap_or_else(|e| panic!("run helm {args:?}: {e}"))
    }

    /// `helm template` with `values` (a file, or none for the defaults) and `--set`s; Err(stderr) if it fails.
    fn template(&self, values: Option<&Path>, sets: &[&str]) -> Result<Vec<Value>, String> {
        self.template_as(RELEASE, NAMESPACE, values, sets)
    }

    fn template_as(
        &self,
        release: &str,
        namespace: &str,
        values: Option<&Path>,
        sets: &[&str],
    ) -> Result<Vec<Value>, String> {
        let chart = chart();
        let mut args = vec!["template", release, chart.to_str().expect("UTF-8 path"), "--namespace", namespace];
        let file;
        if let Some(values) = values {
            file = values.to_str().expect("UTF-8 path").to_string();
            args.extend(["--values", &file]);
        }
        for set in sets {
            args.extend(["--set", set]);
        }
        let out = self.run(&args);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8(out.stdout).expect("helm template prints UTF-8");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("rendered YAML: {e}"));
        Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
    }
}

/// The examples, by file name (at least the five the docs name), then the chart's defaults as "(defaults)".
fn examples() -> Vec<(String, Option<PathBuf>)> {
    let dir = chart().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("examples entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out: Vec<(String, Option<PathBuf>)> = files
        .into_iter()
        .map(|p| (p.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_string(), Some(p)))
        .collect();
    for name in ["minimal", "ha-with-cert-manager", "monitoring", "gcs-keyfile-extra-volumes", "agent-only"] {
        assert!(out.iter().any(|(f, _)| f == &format!("{name}.yaml")), "examples/{name}.yaml is missing");
    }
    out.push(("(defaults)".into(), None));
    out
}

fn kind_of(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn all<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| kind_of(o) == kind).collect()
}

fn get<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind_of(o) == kind && name_of(o) == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in: {:?}", summary(objects)))
}

fn has(objects: &[Value], kind: &str, name: &str) -> bool {
    objects.iter().any(|o| kind_of(o) == kind && name_of(o) == name)
}

fn summary(objects: &[Value]) -> Vec<String> {
    objects.iter().map(|o| format!("{}/{}", kind_of(o), name_of(o))).collect()
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

fn args(deployment: &Value) -> Vec<&str> {
    container(deployment)["args"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

fn env<'a>(deployment: &'a Value, name: &str) -> Option<&'a Value> {
    container(deployment)["env"].as_array()?.iter().find(|e| e["name"] == name)
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().map(|a| a.iter().filter_map(|v| v["name"].as_str()).collect()).unwrap_or_default()
}

fn rendered(helm: &Helm, example: &str) -> Vec<Value> {
    let path = chart().join("examples").join(example);
    helm.template(Some(&path), &[]).unwrap_or_else(|e| panic!("helm template -f {example}: {e}"))
}

#[test]
fn lint_strict_and_template_every_example() {
    let Some(helm) = Helm::find() else { return };
    let chart = chart();
    for (name, values) in examples() {
        let mut args = vec!["lint", "--strict", chart.to_str().expect("UTF-8 path")];
        let file = values.as_ref().map(|v| v.to_str().expect("UTF-8 path").to_string());
        if let Some(file) = &file {
            args.extend(["--values", file]);
        }
        let out = helm.run(&args);
        assert!(
            out.status.success(),
            "helm lint --strict {name}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let objects = helm.template(values.as_deref(), &[]).unwrap_or_else(|e| panic!("helm template {name}: {e}"));
        assert!(objects.len() >= 5, "{name}: {:?}", summary(&objects));
        // The coordinator's config is shipped as is: it must be one the coordinator starts with.
        for cm in all(&objects, "ConfigMap") {
            let text =
                cm["data"]["ferry.yaml"].as_str().unwrap_or_else(|| panic!("{name}: ConfigMap without ferry.yaml"));
            if let Err(e) = LoadedConfig::from_yaml(text, Path::new("ferry.yaml")) {
                panic!("{name}: the rendered ferry.yaml is refused by ferry: {e}\n{text}");
            }
        }
    }
}

#[test]
fn defaults_are_ha_with_a_lease_role_and_no_optional_kinds() {
    let Some(helm) = Helm::find() else { return };
    for objects in [rendered(&helm, "minimal.yaml"), helm.template(None, &[]).expect("defaults render")] {
        let coordinator = get(&objects, "Deployment", "ferry-coordinator");
        assert_eq!(coordinator["spec"]["replicas"], 2);
        assert_eq!(coordinator["spec"]["strategy"]["type"], "RollingUpdate");
        let args = args(coordinator);
        let lease = args.iter().position(|a| *a == "--leader-election-lease").expect("--leader-election-lease");
        assert_eq!(args.get(lease + 1), Some(&"ferry-coordinator"), "{args:?}");
        let field = |name: &str| env(coordinator, name).map(|e| e["valueFrom"]["fieldRef"]["fieldPath"].clone());
        assert_eq!(field("POD_NAME"), Some(json!("metadata.name")));
        assert_eq!(field("POD_NAMESPACE"), Some(json!("metadata.namespace")));
        assert_eq!(container(coordinator)["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(coordinator["spec"]["template"]["spec"]["automountServiceAccountToken"], true);

        let pdb = get(&objects, "PodDisruptionBudget", "ferry-coordinator");
        assert_eq!(pdb["spec"]["minAvailable"], 1);
        assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"], "coordinator");

        let role = get(&objects, "Role", "ferry-coordinator-leader-election");
        assert_eq!(role["metadata"]["namespace"], NAMESPACE);
        let rules = role["rules"].as_array().expect("rules");
        assert_eq!(rules.len(), 2, "{rules:?}");
        for rule in rules {
            assert_eq!(rule["apiGroups"], json!(["coordination.k8s.io"]));
            assert_eq!(rule["resources"], json!(["leases"]));
        }
        assert!(
            rules
                .iter()
                .any(|r| r["verbs"] == json!(["get", "update"]) && r["resourceNames"] == json!(["ferry-coordinator"]))
        );
        assert!(rules.iter().any(|r| r["verbs"] == json!(["create"]) && r.get("resourceNames").is_none()));
        let binding = get(&objects, "RoleBinding", "ferry-coordinator-leader-election");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "ferry-coordinator", "namespace": NAMESPACE}])
        );

        let coordinator_metrics = get(&objects, "Service", "ferry-coordinator-metrics");
        assert_eq!(coordinator_metrics["spec"]["ports"][0]["port"], 9090);
        // Disconnected agents are not Ready but must still be scraped.
        assert_eq!(get(&objects, "Service", "ferry-agent-metrics")["spec"]["publishNotReadyAddresses"], true);
        for kind in ["ServiceMonitor", "PrometheusRule", "Certificate"] {
            assert!(all(&objects, kind).is_empty(), "{kind} without being enabled: {:?}", summary(&objects));
        }
    }
}

/// The agent's verbs on `resource`, from every rule of `role` that names it.
fn verbs_on<'a>(role: &'a Value, resource: &str) -> Vec<&'a str> {
    let rules = role["rules"].as_array().expect("rules");
    let naming = rules.iter().filter(|r| r["resources"].as_array().is_some_and(|l| l.iter().any(|x| x == resource)));
    naming.flat_map(|r| r["verbs"].as_array().expect("verbs").iter().filter_map(Value::as_str)).collect()
}

#[test]
fn the_agent_is_create_only_and_deletes_only_where_retirement_is_allowed() {
    let Some(helm) = Helm::find() else { return };
    let defaults = helm.template(None, &[]).expect("defaults render");
    let role = get(&defaults, "Role", "ferry-agent");
    let cluster_role = get(&defaults, "ClusterRole", "ferry-agent");
    for resource in ["backups", "podvolumebackups"] {
        assert_eq!(verbs_on(role, resource), ["get", "list", "watch", "create"], "{resource}: no patch, no delete");
    }
    assert_eq!(verbs_on(cluster_role, "nonadminbackups"), ["get", "list", "watch", "create"]);
    let agent_args = args(get(&defaults, "Deployment", "ferry-agent")).join(" ");
    assert!(!agent_args.contains("--allow-"), "{agent_args}");

    let allowing = helm
        .template(
            None,
            &[
                "agent.allowRetirement=true",
                "agent.allowReadWriteLocations=true",
                "agent.allowNamespaceMappings={team-a=team-a-dr,shop-*=dr-shop-*}",
            ],
        )
        .expect("render");
    let role = get(&allowing, "Role", "ferry-agent");
    assert_eq!(verbs_on(role, "backups"), ["get", "list", "watch", "create", "delete"]);
    assert_eq!(verbs_on(get(&allowing, "ClusterRole", "ferry-agent"), "nonadminbackups").last(), Some(&"delete"));
    let agent_args = args(get(&allowing, "Deployment", "ferry-agent"));
    for arg in [
        "--allow-retirement",
        "--allow-read-write-locations",
        "--allow-namespace-mapping=team-a=team-a-dr",
        "--allow-namespace-mapping=shop-*=dr-shop-*",
    ] {
        assert!(agent_args.contains(&arg), "{arg}: {agent_args:?}");
    }
    // deploy/rbac/ (kustomize, the test bed) is the same: no delete unless retirement/ is added.
    for file in ["agent-role.yaml", "agent-clusterrole.yaml"] {
        let text = std::fs::read_to_string(root().join("deploy/rbac").join(file)).expect("rbac file");
        let role: Value = serde_saphyr::from_str(&text).expect("yaml");
        for resource in ["backups", "podvolumebackups", "nonadminbackups"] {
            let verbs = verbs_on(&role, resource);
            assert!(!verbs.contains(&"delete") && !verbs.contains(&"patch"), "{file} {resource}: {verbs:?}");
        }
    }
}

#[test]
fn examples_render_what_their_values_ask_for() {
    let Some(helm) = Helm::find() else { return };

    let monitoring = rendered(&helm, "monitoring.yaml");
    let monitors = all(&monitoring, "ServiceMonitor");
    assert_eq!(monitors.len(), 2, "{:?}", summary(&monitoring));
    for monitor in monitors {
        assert_eq!(monitor["metadata"]["labels"]["release"], "kube-prometheus-stack");
        assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    }
    let rule = get(&monitoring, "PrometheusRule", "ferry");
    let exprs: Vec<String> = rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["expr"].as_str().map(str::to_owned))
        .collect();
    for alert in [
        "ferry_cluster_connected == 0",
        "ferry_cluster_stale == 1",
        "ferry_cluster_items{state=\"failed\"} > 0",
        "ferry_cluster_missing_crds > 0",
        "ferry_cluster_refused_storage_locations > 0",
        "ferry_location_healthy == 0",
        "ferry_location_collision == 1",
        "ferry_agent_items{outcome=\"refused\"} > 0",
        "ferry_agent_connected == 0",
    ] {
        assert!(exprs.iter().any(|e| e == alert), "no alert on {alert}: {exprs:?}");
    }
    // metrics.port 9091 reaches both containers and the Services.
    let coordinator = get(&monitoring, "Deployment", "ferry-coordinator");
    assert_eq!(env(coordinator, "FERRY_METRICS_LISTEN").map(|e| e["value"].clone()), Some(json!("0.0.0.0:9091")));
    let agent = get(&monitoring, "Deployment", "ferry-agent");
    assert!(args(agent).contains(&"--metrics-listen=0.0.0.0:9091"), "{:?}", args(agent));
    for deployment in [coordinator, agent] {
        let ports = container(deployment)["ports"].as_array().expect("ports");
        assert!(ports.iter().any(|p| p["name"] == "metrics" && p["containerPort"] == 9091), "{ports:?}");
    }
    assert_eq!(get(&monitoring, "Service", "ferry-agent-metrics")["spec"]["ports"][0]["port"], 9091);

    let gcs = rendered(&helm, "gcs-keyfile-extra-volumes.yaml");
    let coordinator = get(&gcs, "Deployment", "ferry-coordinator");
    assert_eq!(coordinator["spec"]["replicas"], 1);
    // Not the default's rollingUpdate merged in (the API refuses it with Recreate).
    assert_eq!(coordinator["spec"]["strategy"], json!({"type": "Recreate"}));
    assert!(!args(coordinator).contains(&"--leader-election-lease"), "{:?}", args(coordinator));
    assert_eq!(coordinator["spec"]["template"]["spec"]["automountServiceAccountToken"], false);
    assert!(!has(&gcs, "PodDisruptionBudget", "ferry-coordinator"), "a PDB with one replica");
    assert!(!has(&gcs, "Role", "ferry-coordinator-leader-election"));
    assert!(names(&coordinator["spec"]["template"]["spec"]["volumes"]).contains(&"gcs-key"));
    let mounts = &container(coordinator)["volumeMounts"];
    assert!(names(mounts).contains(&"gcs-key") && names(mounts).contains(&"tls"), "{mounts}");
    assert_eq!(
        env(coordinator, "GOOGLE_APPLICATION_CREDENTIALS").map(|e| e["value"].clone()),
        Some(json!("/etc/ferry/gcs/key.json"))
    );
    let agent = get(&gcs, "Deployment", "ferry-agent");
    assert!(names(&agent["spec"]["template"]["spec"]["volumes"]).contains(&"tmp"));
    assert!(names(&container(agent)["volumeMounts"]).contains(&"tmp"));

    let ha = rendered(&helm, "ha-with-cert-manager.yaml");
    assert_eq!(get(&ha, "Deployment", "ferry-coordinator")["spec"]["replicas"], 3);
    assert!(has(&ha, "PodDisruptionBudget", "ferry-coordinator"));
    assert!(!has(&ha, "Deployment", "ferry-agent"));
    let cert = get(&ha, "Certificate", "ferry-coordinator");
    assert_eq!(cert["spec"]["secretName"], "ferry-coordinator-tls");
    assert_eq!(cert["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    let dns = cert["spec"]["dnsNames"].as_array().expect("dnsNames");
    for name in ["ferry.example.com", "ferry-coordinator.ferry.svc"] {
        assert!(dns.contains(&json!(name)), "{name} not in {dns:?}");
    }
    assert_eq!(cert["spec"]["usages"], json!(["server auth", "digital signature"]));

    let agent_only = rendered(&helm, "agent-only.yaml");
    assert!(!has(&agent_only, "Deployment", "ferry-coordinator"));
    let cert = get(&agent_only, "Certificate", "ferry-agent");
    assert_eq!(cert["spec"]["secretName"], "ferry-agent-tls");
    assert_eq!(cert["spec"]["usages"], json!(["client auth", "digital signature"]));
    let uris = cert["spec"]["uris"].as_array().expect("uris");
    assert_eq!(uris.len(), 1, "exactly one identity: {uris:?}");
    // The identity the coordinator will read from this certificate.
    let uri = uris[0].as_str().expect("a URI");
    assert_eq!(parse_identity(uri, "ferry.local"), Ok(Role::Agent { cluster: "dr-west".into() }), "{uri}");
    let groups = get(&agent_only, "PrometheusRule", "ferry")["spec"]["groups"].clone();
    assert_eq!(names(&groups), vec!["ferry-agent"], "the coordinator's alerts in an agent-only release");
}

#[test]
fn bad_values_are_refused() {
    let Some(helm) = Helm::find() else { return };
    let refused = |sets: &[&str], why: &str| match helm.template(None, sets) {
        Ok(objects) => panic!("{sets:?} rendered: {:?}", summary(&objects)),
        Err(e) => assert!(e.contains(why), "{sets:?}: expected {why:?} in:\n{e}"),
    };
    // By values.schema.json.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("two.yaml");
    std::fs::write(&file, "coordinator:\n  replicas: \"two\"\n").expect("write values");
    match helm.template(Some(&file), &[]) {
        Ok(objects) => panic!("replicas \"two\" rendered: {:?}", summary(&objects)),
        Err(e) => assert!(e.contains("/coordinator/replicas") && e.contains("want integer"), "{e}"),
    }
    refused(&["coordinatr.replicas=2"], "additional properties 'coordinatr' not allowed");
    refused(&["metrics.port=70000"], "/metrics/port");
    refused(&["agent.veleroNamespace=Open_Shift"], "/agent/veleroNamespace");
    refused(&["coordinator.leaderElection.leaseName=Not A Name"], "/coordinator/leaderElection/leaseName");
    // By the templates.
    refused(
        &["coordinator.leaderElection.enabled=false"],
        "coordinator.replicas > 1 needs coordinator.leaderElection.enabled",
    );
    refused(&["tls.certManager.enabled=true"], "tls.certManager.issuerRef.name is required");
    refused(&["tls.certManager.enabled=true", "tls.certManager.issuerRef.name=ca"], "agent.clusterName is required");
    refused(&["metrics.serviceMonitor.enabled=true", "metrics.service.enabled=false"], "needs metrics.service.enabled");
    // And what is allowed renders (the refusals above are not just helm failing on everything).
    for sets in [
        vec!["coordinator.leaderElection.enabled=false", "coordinator.replicas=1"],
        vec!["tls.certManager.enabled=true", "tls.certManager.issuerRef.name=ca", "agent.clusterName=dr-west"],
    ] {
        helm.template(None, &sets).unwrap_or_else(|e| panic!("{sets:?}: {e}"));
    }
}

/// The container port named `name` of a Deployment's first container.
fn container_port(deployment: &Value, name: &str) -> Value {
    let ports = container(deployment)["ports"].as_array().cloned().unwrap_or_default();
    let port = ports.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no port {name}: {ports:?}"));
    port["containerPort"].clone()
}

/// The ingress rules of a NetworkPolicy: (its one port, its `from` peers; none: from anywhere).
fn ingress_rules(policy: &Value) -> Vec<(Value, Option<Value>)> {
    let rules = policy["spec"]["ingress"].as_array().cloned().unwrap_or_default();
    rules
        .iter()
        .map(|rule| {
            let ports = rule["ports"].as_array().cloned().unwrap_or_default();
            assert_eq!(ports.len(), 1, "one port a rule: {rule}");
            assert_eq!(ports[0]["protocol"], "TCP", "{rule}");
            (ports[0]["port"].clone(), rule.get("from").cloned())
        })
        .collect()
}

/// Checks one component's policy against its Deployment: it selects exactly the Deployment's pods, is about
/// ingress only (egress open), and lets in, per container port, who `expected` says (port name → `from`).
fn check_policy(objects: &[Value], component: &str, expected: &[(&str, Option<Value>)]) {
    let name = format!("ferry-{component}");
    let policy = get(objects, "NetworkPolicy", &name);
    let deployment = get(objects, "Deployment", &name);
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"], "{name}");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]), "{name}: egress stays open");
    let want: Vec<(Value, Option<Value>)> =
        expected.iter().map(|(port, from)| (container_port(deployment, port), from.clone())).collect();
    assert_eq!(ingress_rules(policy), want, "{name}: {policy}");
    // Every port the container serves has its rule: nothing it listens on is shut by mistake.
    let ports = container(deployment)["ports"].as_array().map_or(0, Vec::len);
    assert_eq!(ports, expected.len(), "{name}: {deployment}");
}

#[test]
fn network_policies_are_on_by_default_match_the_ports_and_can_be_turned_off() {
    let Some(helm) = Helm::find() else { return };
    let monitoring = || json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]);
    for objects in [helm.template(None, &[]).expect("defaults render"), rendered(&helm, "minimal.yaml")] {
        assert_eq!(all(&objects, "NetworkPolicy").len(), 2, "{:?}", summary(&objects));
        // gRPC from anywhere (agents are in other clusters), the side port from the monitoring namespace.
        check_policy(&objects, "coordinator", &[("grpc", None), ("metrics", Some(monitoring()))]);
        check_policy(&objects, "agent", &[("metrics", Some(monitoring()))]);
    }

    // The ports follow the values; the monitoring peers and the coordinator's sources are configurable.
    let sets = [
        "metrics.port=9191",
        "coordinator.port=8443",
        "networkPolicy.monitoring.namespaceSelector.matchLabels.team=observability",
        "networkPolicy.monitoring.podSelector.matchLabels.app=prometheus",
        "networkPolicy.coordinatorFrom[0].ipBlock.cidr=203.0.113.0/24",
    ];
    let objects = helm.template(None, &sets).unwrap_or_else(|e| panic!("{sets:?}: {e}"));
    let scraper = json!([{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring", "team": "observability"}},
        "podSelector": {"matchLabels": {"app": "prometheus"}},
    }]);
    let own_agent = json!({"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "ferry", "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": "agent",
    }}});
    let agents = json!([{"ipBlock": {"cidr": "203.0.113.0/24"}}, own_agent]);
    check_policy(&objects, "coordinator", &[("grpc", Some(agents)), ("metrics", Some(scraper.clone()))]);
    check_policy(&objects, "agent", &[("metrics", Some(scraper))]);
    assert_eq!(container_port(get(&objects, "Deployment", "ferry-coordinator"), "grpc"), 8443);
    assert_eq!(container_port(get(&objects, "Deployment", "ferry-agent"), "metrics"), 9191);

    // One component, one policy; and off when asked.
    let agent_only = rendered(&helm, "agent-only.yaml");
    assert_eq!(names_of(&agent_only, "NetworkPolicy"), ["ferry-agent"]);
    let off = helm.template(None, &["networkPolicy.enabled=false"]).expect("renders");
    assert!(all(&off, "NetworkPolicy").is_empty(), "{:?}", summary(&off));
    assert!(has(&off, "Deployment", "ferry-coordinator") && has(&off, "Deployment", "ferry-agent"));
    // A peer of nothing would let everyone in: the schema refuses it.
    match helm.template(None, &["networkPolicy.coordinatorFrom[0].ipBlok.cidr=10.0.0.0/8"]) {
        Ok(objects) => panic!("a misspelt peer rendered: {:?}", summary(&objects)),
        Err(e) => assert!(e.contains("/networkPolicy/coordinatorFrom/0"), "{e}"),
    }
}

/// The kustomize base ships the same policies (no kustomize binary needed: its files are read as they are).
#[test]
fn kustomize_network_policies_match_the_deployments_ports() {
    let base = root().join("deploy/kustomize/base");
    let read = |path: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(base.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        docs.into_iter().filter(|d| !d.is_null()).collect()
    };
    let monitoring = || json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]);
    for (component, expected) in [
        ("coordinator", vec![("grpc", None), ("metrics", Some(monitoring()))]),
        ("agent", vec![("metrics", Some(monitoring()))]),
    ] {
        let kustomization = read(&format!("{component}/kustomization.yaml"));
        let resources = kustomization[0]["resources"].as_array().cloned().unwrap_or_default();
        assert!(resources.contains(&json!("networkpolicy.yaml")), "{component}: {resources:?}");
        let mut objects = read(&format!("{component}/deployment.yaml"));
        objects.extend(read(&format!("{component}/networkpolicy.yaml")));
        check_policy(&objects, component, &expected);
    }
}

fn names_of<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a str> {
    all(objects, kind).into_iter().map(name_of).collect()
}

/// Installs the CRDs of build-helm.sh's directory on the bed's cluster and waits until they are Established.
async fn install_crds(client: &kube::Client, dir: &Path) -> Vec<String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("CRD file").path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = crd.metadata.name.clone().expect("CRD name");
        crds.patch(&name, &PatchParams::apply("ferry-test").force(), &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("install CRD {name}: {e}"));
        names.push(name);
    }
    for name in &names {
        eventually(&format!("CRD {name} Established"), Duration::from_secs(30), || async {
            let crd = crds.get_opt(name).await.ok().flatten()?;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
    }
    names
}

/// A server-side apply of `object` as a dry run with strict field validation; Err(the apiserver's answer).
async fn dry_run(
    client: &kube::Client,
    resources: &mut HashMap<GroupVersionKind, (ApiResource, Scope)>,
    object: &Value,
) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().ok_or("no apiVersion")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind_of(object));
    if !resources.contains_key(&gvk) {
        let (ar, caps) = discovery::pinned_kind(client, &gvk).await.map_err(|e| format!("discovery: {e}"))?;
        resources.insert(gvk.clone(), (ar, caps.scope));
    }
    let (ar, scope) = &resources[&gvk];
    let api: Api<DynamicObject> = match scope {
        Scope::Namespaced => {
            let ns = object["metadata"]["namespace"].as_str().ok_or("a namespaced object without a namespace")?;
            Api::namespaced_with(client.clone(), ns, ar)
        }
        Scope::Cluster => Api::all_with(client.clone(), ar),
    };
    let params = PatchParams::apply("ferry-test").dry_run().validation_strict();
    api.patch(name_of(object), &params, &Patch::Apply(object)).await.map(drop).map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_rendered_object_passes_a_strict_server_side_dry_run() {
    let Some(helm) = Helm::find() else { return };
    // Another release name than "ferry": the bed already has deploy/rbac's ClusterRoleBinding ferry-agent (bound to
    // user ferry-agent, field manager ferry-testbed), and a dry-run apply over it would conflict on its subjects.
    let (release, namespace) = ("chart", "ferry-chart");
    let renders: Vec<(String, Vec<Value>)> = examples()
        .into_iter()
        .map(|(name, values)| {
            let objects =
                helm.template_as(release, namespace, values.as_deref(), &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, objects)
        })
        .collect();

    let bed = TestBed::up();
    let client = bed.admin("a").await;
    let installed = install_crds(&client, &helm.crds_dir).await;
    assert_eq!(installed.len(), 3, "{installed:?}");
    // The release namespace and the Velero namespaces the agent's Role goes into (the bed has `velero`).
    let mut namespaces: BTreeSet<String> = BTreeSet::from([namespace.to_string()]);
    for (_, objects) in &renders {
        namespaces.extend(objects.iter().filter_map(|o| o["metadata"]["namespace"].as_str().map(str::to_owned)));
    }
    let existing = api(&client, "", "v1", "Namespace", None);
    for ns in &namespaces {
        if existing.get_opt(ns).await.expect("get namespace").is_none() {
            create_namespace(&client, ns).await;
        }
    }

    let mut resources = HashMap::new();
    let mut failures = Vec::new();
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for (name, objects) in &renders {
        for object in objects {
            match dry_run(&client, &mut resources, object).await {
                Ok(()) => *checked.entry(kind_of(object).to_string()).or_default() += 1,
                Err(e) => failures.push(format!("{name}: {}/{}: {e}", kind_of(object), name_of(object))),
            }
        }
    }
    assert!(failures.is_empty(), "refused by the apiserver:\n{}", failures.join("\n"));
    eprintln!("dry-run accepted: {checked:?}");
    for kind in [
        "Deployment",
        "Service",
        "ServiceAccount",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
        "Certificate",
    ] {
        assert!(checked.contains_key(kind), "no {kind} was dry-run: {checked:?}");
    }

    // The same path refuses what is wrong, for a built-in kind and for each CRD's schema: the acceptances above
    // mean something.
    let (_, minimal) = renders.iter().find(|(n, _)| n == "minimal.yaml").expect("minimal.yaml");
    let mut deployment = get(minimal, "Deployment", "chart-ferry-coordinator").clone();
    deployment["spec"]["template"]["spec"]["containers"][0]["notAField"] = json!(1);
    let (_, monitoring) = renders.iter().find(|(n, _)| n == "monitoring.yaml").expect("monitoring.yaml");
    let mut monitor = get(monitoring, "ServiceMonitor", "chart-ferry-agent").clone();
    monitor["spec"]["endpoints"][0]["notAField"] = json!(1);
    let mut rule = get(monitoring, "PrometheusRule", "chart-ferry").clone();
    rule["spec"]["groups"][0]["rules"][0]["for"] = json!("ten minutes");
    let (_, ha) = renders.iter().find(|(n, _)| n == "ha-with-cert-manager.yaml").expect("ha-with-cert-manager.yaml");
    let mut cert = get(ha, "Certificate", "chart-ferry-coordinator").clone();
    cert["spec"]["notAField"] = json!(1);
    for (bad, why) in [(deployment, "notAField"), (monitor, "notAField"), (rule, "for"), (cert, "notAField")] {
        match dry_run(&client, &mut resources, &bad).await {
            Ok(()) => panic!("a wrong {} was accepted", kind_of(&bad)),
            Err(e) => assert!(e.contains(why), "{}: {e}", kind_of(&bad)),
        }
    }
}

/// The metric names in `text` (`ferry_` and the rest of the identifier).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("ferry_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// Every series name the two `/metrics` pages export, read off pages rendered by the code that serves them (with
/// one cluster and one location, so every family has samples): a counter's samples end in `_total`, a histogram's
/// in `_bucket`, `_count` and `_sum`, the build info's in `_info`.
fn exported_series() -> BTreeSet<String> {
    use ferry::grpc::proto::{ClusterApis, ClusterStatus, GetStatusResponse, LocationStatus};
    let status = GetStatusResponse {
        clusters: vec![ClusterStatus { cluster: "b".into(), apis: Some(ClusterApis::default()), ..Default::default() }],
        locations: vec![LocationStatus { name: "shared".into(), ..Default::default() }],
        ..Default::default()
    };
    let coordinator = ferry::coordinator::telemetry::Telemetry::new(["b"], ["shared"]).render(&status);
    let agent = ferry::agent::health::render(&Default::default(), &ferry::agent::telemetry::AgentTelemetry::new());
    [coordinator.expect("the coordinator's page"), agent.expect("the agent's page")]
        .iter()
        .flat_map(|page| page.lines().filter(|l| !l.starts_with('#')))
        .map(|l| l[..l.find(['{', ' ']).unwrap_or(l.len())].to_string())
        .collect()
}

#[test]
fn grafana_dashboard_queries_existing_metrics_through_a_datasource_variable() {
    let path = root().join("deploy/grafana/ferry-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let exported = exported_series();
    assert!(exported.contains("ferry_cluster_connected") && exported.contains("ferry_agent_items"), "{exported:?}");
    assert!(exported.contains("ferry_agent_connects_total"), "a counter's samples end in _total: {exported:?}");
    assert!(exported.contains("ferry_delivery_latency_seconds_bucket"), "{exported:?}");

    let variables = dashboard["templating"]["list"].as_array().expect("templating.list");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus")
    );
    let mut queried = BTreeSet::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap_or_default();
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().unwrap_or_else(|| panic!("{title}: no targets"));
        assert!(!targets.is_empty(), "{title}: no targets");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("{title}: a target without expr"));
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{title}: {expr}");
            for name in names {
                assert!(exported.contains(&name), "{title}: {name} is not a metric ferry exports ({expr})");
                queried.insert(name);
            }
        }
    }
    // Every gauge the alerts are on has a panel.
    for name in [
        "ferry_cluster_connected",
        "ferry_cluster_stale",
        "ferry_cluster_items",
        "ferry_cluster_missing_crds",
        "ferry_cluster_refused_storage_locations",
        "ferry_location_healthy",
        "ferry_location_collision",
        "ferry_agent_items",
        "ferry_agent_connected",
    ] {
        assert!(queried.contains(name), "no panel on {name}");
    }
}

#[test]
fn revocation_list_and_coordinator_identity_values() {
    let Some(helm) = Helm::find() else { return };
    // Defaults: no list mounted; agents check the coordinator's URI SAN (auto).
    let objects = helm.template(None, &[]).expect("defaults render");
    let coordinator = get(&objects, "Deployment", "ferry-coordinator");
    assert!(env(coordinator, "FERRY_TLS_REVOCATION_LIST").is_none());
    let agent = get(&objects, "Deployment", "ferry-agent");
    assert_eq!(env(agent, "FERRY_COORDINATOR_IDENTITY").map(|e| e["value"].clone()), Some(json!("auto")));

    let sets = ["coordinator.tls.revocationList.configMapName=ferry-revoked", "agent.coordinatorIdentity=none"];
    let objects = helm.template(None, &sets).expect("with a list");
    let coordinator = get(&objects, "Deployment", "ferry-coordinator");
    let path = env(coordinator, "FERRY_TLS_REVOCATION_LIST").map(|e| e["value"].clone());
    assert_eq!(path, Some(json!("/etc/ferry/revocation/revoked.txt")));
    let pod = &coordinator["spec"]["template"]["spec"];
    let volume =
        pod["volumes"].as_array().expect("volumes").iter().find(|v| v["name"] == "revocation").expect("volume");
    assert_eq!(volume["configMap"]["name"], "ferry-revoked");
    let mounts = container(coordinator)["volumeMounts"].as_array().expect("mounts");
    let mount = mounts.iter().find(|m| m["name"] == "revocation").expect("mount");
    // A directory, never a subPath: kubelet does not update subPath mounts, and the list must reach the pod.
    assert_eq!(mount["mountPath"], "/etc/ferry/revocation");
    assert!(mount.get("subPath").is_none(), "{mount:?}");
    let agent = get(&objects, "Deployment", "ferry-agent");
    assert_eq!(env(agent, "FERRY_COORDINATOR_IDENTITY").map(|e| e["value"].clone()), Some(json!("none")));

    let both = ["coordinator.tls.revocationList.configMapName=a", "coordinator.tls.revocationList.secretName=b"];
    let err = helm.template(None, &both).expect_err("both sources");
    assert!(err.contains("not both"), "{err}");
    let err = helm.template(None, &["agent.coordinatorIdentity=yes"]).expect_err("bad identity");
    assert!(err.contains("coordinatorIdentity"), "{err}");
}
