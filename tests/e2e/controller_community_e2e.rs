//! The 20-package community install: real bundles of
//! `redhat-openshift-ecosystem/community-operators-prod`, read in the repository's own layout
//! (`operators/<package>/<version>/{manifests,metadata}`) from the shared corpus
//! (`$CAPSTAN_SHARED/corpus/community-operators-prod/operators`, 13 packages) and from
//! `tests/fixtures/community-operators-prod/` (more bundles copied from the same repository),
//! published to the local registry as one catalog and installed by `capstan controller` on the
//! kwok-only cluster (`CAPSTAN_REAL_NODE=0 bash tests/cluster/up.sh all`; pods are placed on kwok's
//! fake node, which reports them Ready without running them).
//!
//! 20 packages end with their CSV Succeeded, each in a namespace of its own with the
//! OperatorGroup its install modes allow:
//! - mercury-operator brings strimzi-kafka-operator and camel-k; automotive-infra, subscribed in
//!   the same namespace after them, installs too;
//! - kuadrant-operator brings authorino-operator, limitador-operator and dns-operator;
//!   rabbitmq-messaging-topology-operator brings rabbitmq-cluster-operator (a package dependency
//!   and a GVK one);
//! - argocd-operator 0.18.0 (4 MB of manifests) installs;
//! - cert-manager, etcd, keda, node-healthcheck-operator, self-node-remediation, prometheus,
//!   clickhouse, project-quay, and jaeger (last: its mutating webhook on every Deployment, with
//!   failurePolicy Ignore, has no live endpoint on the fake node, so each Deployment write after it
//!   waits for the webhook's timeout).
//!
//! And one the catalog cannot meet: eclipse-che needs devworkspace-operator, which no catalog of
//! the cluster offers; its Subscription says so in `ResolutionFailed`.
//!
//! One table-driven test, kept whole: the Subscriptions are created together and installed by one
//! controller at the same time (which is what it checks at scale), and it prints a table of the
//! outcomes and how long each took; its steps are the helpers above it. The controller watches
//! every namespace, so no other group's tests run meanwhile ([`crate::support::group`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};
use capstan::api::{InstallPlan, Subscription};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

/// A bundle directory `<package>/<version>` in the public repository's layout: the shared
/// corpus's `operators/` first, then this repository's fixtures.
fn bundle_dir(package: &str, version: &str) -> PathBuf {
    let corpus =
        crate::support::shared_dir().join("corpus/community-operators-prod/operators").join(package).join(version);
    if corpus.join("manifests").is_dir() {
        return corpus;
    }
    let fixture =
        crate::support::repo_root().join("tests/fixtures/community-operators-prod").join(package).join(version);
    assert!(
        fixture.join("manifests").is_dir(),
        "bundle {package}/{version} is neither in {} nor in {}",
        corpus.display(),
        fixture.display()
    );
    fixture
}

/// The bundles of the catalog: (package, version). Dependencies are in it at the versions their
/// dependents ask for (kuadrant-operator 0.11.1 wants authorino-operator exactly 0.13.0).
const BUNDLES: [(&str, &str); 21] = [
    ("mercury-operator", "1.0.2"),
    ("strimzi-kafka-operator", "0.28.0"),
    ("camel-k", "1.9.0"),
    ("automotive-infra", "0.0.3"),
    ("argocd-operator", "0.18.0"),
    ("kuadrant-operator", "0.11.1"),
    ("authorino-operator", "0.13.0"),
    ("limitador-operator", "0.11.0"),
    ("dns-operator", "0.6.0"),
    ("rabbitmq-messaging-topology-operator", "1.19.3"),
    ("rabbitmq-cluster-operator", "2.22.3"),
    ("cert-manager", "1.16.5"),
    ("etcd", "0.9.4"),
    ("keda", "2.7.1"),
    ("node-healthcheck-operator", "0.12.0"),
    ("self-node-remediation", "0.13.0"),
    ("prometheus", "0.56.3"),
    ("clickhouse", "0.26.0"),
    ("project-quay", "3.18.0"),
    ("jaeger", "1.65.0"),
    ("eclipse-che", "7.44.0"),
];

/// One Subscription of the test.
struct Case {
    /// Prefix of its namespace.
    prefix: &'static str,
    package: &'static str,
    channel: &'static str,
    /// An OperatorGroup for all namespaces (else one targeting its own namespace).
    global: bool,
    /// The CSV of the package itself (`installedCSV`).
    own: &'static str,
    /// Every CSV its plan installs (dependencies included), sorted.
    csvs: &'static [&'static str],
}

const CASES: [Case; 14] = [
    Case {
        prefix: "cc-argocd",
        package: "argocd-operator",
        channel: "alpha",
        global: true,
        own: "argocd-operator.v0.18.0",
        csvs: &["argocd-operator.v0.18.0"],
    },
    Case {
        prefix: "cc-kuadrant",
        package: "kuadrant-operator",
        channel: "stable",
        global: true,
        own: "kuadrant-operator.v0.11.1",
        csvs: &[
            "authorino-operator.v0.13.0",
            "dns-operator.v0.6.0",
            "kuadrant-operator.v0.11.1",
            "limitador-operator.v0.11.0",
        ],
    },
    Case {
        prefix: "cc-rabbitmq",
        package: "rabbitmq-messaging-topology-operator",
        channel: "stable",
        global: false,
        own: "rabbitmq-messaging-topology-operator.v1.19.3",
        csvs: &["rabbitmq-cluster-operator.v2.22.3", "rabbitmq-messaging-topology-operator.v1.19.3"],
    },
    Case {
        prefix: "cc-cert-manager",
        package: "cert-manager",
        channel: "stable",
        global: true,
        own: "cert-manager.v1.16.5",
        csvs: &["cert-manager.v1.16.5"],
    },
    Case {
        prefix: "cc-etcd",
        package: "etcd",
        channel: "singlenamespace-alpha",
        global: false,
        own: "etcdoperator.v0.9.4",
        csvs: &["etcdoperator.v0.9.4"],
    },
    Case {
        prefix: "cc-keda",
        package: "keda",
        channel: "alpha",
        global: true,
        own: "keda.v2.7.1",
        csvs: &["keda.v2.7.1"],
    },
    Case {
        prefix: "cc-nhc",
        package: "node-healthcheck-operator",
        channel: "stable",
        global: true,
        own: "node-healthcheck-operator.v0.12.0",
        csvs: &["node-healthcheck-operator.v0.12.0"],
    },
    Case {
        prefix: "cc-snr",
        package: "self-node-remediation",
        channel: "stable",
        global: true,
        own: "self-node-remediation.v0.13.0",
        csvs: &["self-node-remediation.v0.13.0"],
    },
    Case {
        prefix: "cc-prometheus",
        package: "prometheus",
        channel: "beta",
        global: false,
        own: "prometheusoperator.0.56.3",
        csvs: &["prometheusoperator.0.56.3"],
    },
    Case {
        prefix: "cc-clickhouse",
        package: "clickhouse",
        channel: "latest",
        global: false,
        own: "clickhouse-operator.v0.26.0",
        csvs: &["clickhouse-operator.v0.26.0"],
    },
    Case {
        prefix: "cc-quay",
        package: "project-quay",
        channel: "stable-3.18",
        global: false,
        own: "quay-operator.v3.18.0",
        csvs: &["quay-operator.v3.18.0"],
    },
    Case {
        prefix: "cc-mercury",
        package: "mercury-operator",
        channel: "stable",
        global: false,
        own: "mercury-operator.v1.0.2",
        csvs: &["camel-k-operator.v1.9.0", "mercury-operator.v1.0.2", "strimzi-cluster-operator.v0.28.0"],
    },
    // After mercury-operator, in its namespace (see below).
    Case {
        prefix: "cc-mercury",
        package: "automotive-infra",
        channel: "alpha",
        global: false,
        own: "automotive-infra.v0.0.3",
        csvs: &["automotive-infra.v0.0.3"],
    },
    // Last (see the header).
    Case {
        prefix: "cc-jaeger",
        package: "jaeger",
        channel: "stable",
        global: true,
        own: "jaeger-operator.v1.65.0",
        csvs: &["jaeger-operator.v1.65.0"],
    },
];

fn subscription(ns: &str, package: &str, channel: &str, catalog_ns: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": package, "namespace": ns},
        "spec": {"name": package, "channel": channel, "source": "community", "sourceNamespace": catalog_ns}
    })
}

/// Waits until the Subscription's plan is Complete and installs exactly `csvs`, each CSV
/// Succeeded with its Deployments Available, and the Subscription AtLatestKnown.
async fn installed(client: &kube::Client, ns: &str, case: &Case) {
    let plan = plan_in_phase(client, ns, case.package, "Complete").await;
    let mut names = plan.spec.cluster_service_version_names.clone();
    names.sort();
    assert_eq!(names, case.csvs, "CSVs of the plan of {ns}/{}", case.package);
    for csv in case.csvs {
        csv_version_succeeded(client, ns, csv).await;
    }
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Subscription {ns}/{} AtLatestKnown", case.package), WAIT, || async {
        let st = serde_json::to_value(subs.get(case.package).await.ok()?.status?).ok()?;
        if let Some(c) = st["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "ResolutionFailed" && c["status"] == "True"))
        {
            panic!("Subscription {ns}/{} failed to resolve: {}", case.package, c["message"]);
        }
        (st["state"] == "AtLatestKnown" && st["installedCSV"] == case.own).then_some(())
    })
    .await;
}

/// Copies every bundle of [`BUNDLES`] as a catalog maintainer publishes them (kuadrant-operator's
/// `oci://` relatedImages scheme fixed by `copy_bundle`, which opm and capstan refuse; nothing
/// else changed), pushes them and a catalog of them; returns the catalog reference.
fn publish_community(registry: &str, repo: &str, work: &std::path::Path) -> String {
    let started = Instant::now();
    let dirs: Vec<(PathBuf, &str)> = BUNDLES
        .iter()
        .map(|(p, v)| {
            let to = work.join("bundles").join(p).join(v);
            copy_bundle(&bundle_dir(p, v), &to);
            (to, *v)
        })
        .collect();
    let list: Vec<(&std::path::Path, &str, &str)> = dirs.iter().map(|(d, v)| (d.as_path(), *v, "replaces")).collect();
    let catalog_ref = publish_dirs(registry, repo, "community-catalog", work, &list);
    eprintln!("published {} bundles and the catalog in {:.1?}", BUNDLES.len(), started.elapsed());
    catalog_ref
}

/// A namespace for `case` with the OperatorGroup it asks for, and its Subscription in it.
async fn subscribe_case(client: &kube::Client, case: &Case, catalog_ns: &str) -> TestNamespace {
    let ns = if case.global {
        namespace_with_global_group(client, case.prefix).await
    } else {
        namespace_with_group(client, case.prefix).await
    };
    create::<Subscription>(client, &ns.name, subscription(&ns.name, case.package, case.channel, catalog_ns)).await;
    ns
}

/// The case of `package`.
fn case(package: &str) -> &'static Case {
    CASES.iter().find(|c| c.package == package).expect("case")
}

/// What the test prints: (Subscription, outcome, time until it was reached).
type Results = Vec<(String, String, Duration)>;

/// automotive-infra in mercury-operator's namespace `ns`, after mercury and its dependencies: the
/// installed dependencies keep the namespace resolvable, and mercury's plan stays the only other
/// one.
async fn automotive_installs_beside_mercury(client: &kube::Client, ns: &str, catalog_ns: &str, results: &mut Results) {
    let automotive = case("automotive-infra");
    let t = Instant::now();
    create::<Subscription>(client, ns, subscription(ns, automotive.package, automotive.channel, catalog_ns)).await;
    installed(client, ns, automotive).await;
    results.push((
        format!("{} (after mercury-operator, same namespace)", automotive.package),
        format!("Succeeded: {}", automotive.csvs.join(", ")),
        t.elapsed(),
    ));
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    assert_eq!(
        plans.list(&Default::default()).await.expect("plans").items.len(),
        2,
        "one plan for mercury-operator, one for automotive-infra"
    );
    installed(client, ns, case("mercury-operator")).await;
}

/// jaeger, last (see the header): installed in a namespace of its own, which is returned.
async fn jaeger_installs_last(client: &kube::Client, catalog_ns: &str, results: &mut Results) -> TestNamespace {
    let jaeger = case("jaeger");
    let jaeger_ns = namespace_with_global_group(client, jaeger.prefix).await;
    let t = Instant::now();
    create::<Subscription>(
        client,
        &jaeger_ns.name,
        subscription(&jaeger_ns.name, jaeger.package, jaeger.channel, catalog_ns),
    )
    .await;
    installed(client, &jaeger_ns.name, jaeger).await;
    results.push((jaeger.package.to_string(), format!("Succeeded: {}", jaeger.csvs.join(", ")), t.elapsed()));
    jaeger_ns
}

/// eclipse-che's Subscription in `ns`: the dependency no catalog offers, named in its status with
/// the catalog that was searched; no InstallPlan. Returns the message.
async fn che_is_unresolvable_naming_the_missing_package(client: &kube::Client, ns: &str, catalog_ns: &str) -> String {
    let c = subscription_condition(client, ns, "eclipse-che", "ResolutionFailed", "True").await;
    let message = c["message"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains("devworkspace-operator")
            && message.contains("eclipse-che")
            && message.contains(&format!("{catalog_ns}/community")),
        "the message names the missing package, the Subscription's package and the catalog: {message}"
    );
    assert!(message.len() < 1200, "one readable message, not a dump ({} bytes): {message}", message.len());
    let che_plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    assert!(
        che_plans.list(&Default::default()).await.expect("plans").items.is_empty(),
        "no InstallPlan for an unresolvable Subscription"
    );
    message
}

/// Prints the table of outcomes and checks that 20 packages Succeeded.
fn report(results: &Results, started: Instant) {
    let succeeded: usize = CASES.iter().map(|c| c.csvs.len()).sum();
    eprintln!("\n| Subscription (package) | outcome | after |\n|---|---|---:|");
    for (p, o, d) in results {
        eprintln!("| {p} | {o} | {:.1} s |", d.as_secs_f64());
    }
    eprintln!(
        "\n{succeeded} packages Succeeded, 1 (eclipse-che) unresolvable as its status says; whole test {:.1?}",
        started.elapsed()
    );
    assert_eq!(succeeded, 20, "20 community packages installed");
}

/// Removes what the installs in `namespaces` left outside them, once the controller stopped.
async fn clean_up(client: &kube::Client, namespaces: &[&str]) {
    cleanup_cluster_rbac(client, namespaces).await;
    // The webhook configurations point at Services of the fake node: remove them, or every later
    // write they match (jaeger's: every Deployment) waits for their timeout.
    for ns in namespaces {
        let sel = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
        let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete_collection(&DeleteParams::default(), &sel)
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete_collection(&DeleteParams::default(), &sel)
            .await;
    }
    // The OperatorGroups go now, not with their namespaces' slow termination: a later test that
    // installs one of these operators again (kuadrant in controller_deps_e2e) would otherwise
    // meet a group that provides its APIs everywhere (InterOperatorGroupOwnerConflict, as in OLM).
    for ns in namespaces {
        let groups: Api<capstan::api::OperatorGroup> = Api::namespaced(client.clone(), ns);
        let _ = groups.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
        eventually(&format!("the OperatorGroups of {ns} gone"), WAIT, || async {
            groups.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
        })
        .await;
    }
}

/// The whole table at once: every Subscription but automotive-infra (after mercury-operator) and
/// jaeger (last) is created together, then each is waited for; eclipse-che is unresolvable.
#[test]
fn twenty_community_packages_install_or_say_why_not() {
    crate::support::run("controller_community_e2e", 4, async {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
            )
            .try_init();
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("ctl-community-{}", std::process::id());
        apply_crds(&client).await;

        let started = Instant::now();
        let catalog_ref = publish_community(&registry, &repo, work.path());
        let catalog_ns = TestNamespace::new(&client, "cc-catalog").await;
        let options = capstan::controller::Options {
            global_catalog_namespace: catalog_ns.name.clone(),
            catalog_cache: None,
            ..Default::default()
        };
        let controller = tokio::spawn(capstan::controller::run(client.clone(), options, std::future::pending()));
        catalog_source(&client, &catalog_ns.name, "community", &catalog_ref).await;

        let at_once = || CASES.iter().filter(|c| c.package != "automotive-infra" && c.package != "jaeger");
        let mut namespaces: Vec<(&str, TestNamespace)> = Vec::new();
        for case in at_once() {
            namespaces.push((case.prefix, subscribe_case(&client, case, &catalog_ns.name).await));
        }
        let che = namespace_with_global_group(&client, "cc-che").await;
        create::<Subscription>(&client, &che.name, subscription(&che.name, "eclipse-che", "stable", &catalog_ns.name))
            .await;
        let created = Instant::now();
        let ns_name = |prefix: &str| {
            namespaces.iter().find(|(p, _)| *p == prefix).map(|(_, n)| n.name.clone()).expect("namespace")
        };

        let mut results: Results = Vec::new();
        for case in at_once() {
            installed(&client, &ns_name(case.prefix), case).await;
            results.push((case.package.to_string(), format!("Succeeded: {}", case.csvs.join(", ")), created.elapsed()));
        }
        automotive_installs_beside_mercury(&client, &ns_name("cc-mercury"), &catalog_ns.name, &mut results).await;
        let jaeger_ns = jaeger_installs_last(&client, &catalog_ns.name, &mut results).await;
        let message = che_is_unresolvable_naming_the_missing_package(&client, &che.name, &catalog_ns.name).await;
        results.push(("eclipse-che".into(), format!("ResolutionFailed: {message}"), created.elapsed()));
        report(&results, started);

        controller.abort();
        let mut all: Vec<String> = namespaces.iter().map(|(_, n)| n.name.clone()).collect();
        all.push(jaeger_ns.name.clone());
        all.push(che.name.clone());
        clean_up(&client, &all.iter().map(String::as_str).collect::<Vec<_>>()).await;
    })
}
