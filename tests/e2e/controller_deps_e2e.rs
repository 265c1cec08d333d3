//! `capstan controller` end to end, part two: dependencies from real corpus
//! data (kuadrant-operator), an operator with cluster-scoped RBAC (kaiwudb-operator, which also
//! depends on nginx-operator) with Subscription `spec.config`, and bad input that must end in a
//! condition saying what is wrong without disturbing what else runs in the namespace.
//!
//! One test function (one controller per test binary: it watches every namespace).

use std::path::Path;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

#[test]
fn controller_dependencies_cluster_rbac_config_and_bad_input() {
    crate::support::run("controller_deps_e2e", 4, async {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
            )
            .try_init();
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("ctl-deps-{}", std::process::id());
        apply_crds(&client).await;

        // Corpus bundles, published by capstan: kuadrant-operator and several versions of each of its
        // dependencies, so that the required versions (not the channel heads) must be chosen.
        let corpus = crate::support::shared_dir().join("corpus/community-operators-prod/operators");
        let picks = [
            ("authorino-operator", "0.12.0", "replaces"),
            ("authorino-operator", "0.13.0", "replaces"),
            ("authorino-operator", "0.13.1", "replaces"),
            ("authorino-operator", "0.14.0", "replaces"),
            ("limitador-operator", "0.10.0", "semver"),
            ("limitador-operator", "0.11.0", "semver"),
            ("dns-operator", "0.2.0", "semver"),
            ("dns-operator", "0.6.0", "semver"),
            ("kuadrant-operator", "0.10.0", "semver"),
            ("kuadrant-operator", "0.11.1", "semver"),
        ];
        let copies = work.path().join("bundles");
        let mut dirs = Vec::new();
        for (pkg, ver, mode) in picks {
            let to = copies.join(pkg).join(ver);
            copy_bundle(&corpus.join(pkg).join(ver), &to);
            dirs.push((to, ver, mode));
        }
        let list: Vec<(&Path, &str, &str)> = dirs.iter().map(|(d, v, m)| (d.as_path(), *v, *m)).collect();
        let corpus_ref = publish_dirs(&registry, &repo, "corpus-catalog", work.path(), &list);
        let examples_ref = publish(&registry, &repo, work.path());

        let catalog_ns = TestNamespace::new(&client, "ctl-deps-catalog").await;
        let options = capstan::controller::Options {
            global_catalog_namespace: catalog_ns.name.clone(),
            catalog_cache: None,
            ..Default::default()
        };
        // With its configuration, so that scoped installs (impersonation) work.
        let controller = tokio::spawn(capstan::controller::run_with_config(
            crate::support::admin_config().await,
            options,
            std::future::pending(),
        ));
        catalog_source(&client, &catalog_ns.name, "corpus", &corpus_ref).await;
        catalog_source(&client, &catalog_ns.name, "examples", &examples_ref).await;

        // 3. kuadrant-operator brings authorino 0.13.0, limitador 0.11.0 and dns 0.6.0 (the versions
        //    its bundle requires), in one InstallPlan, each CSV Succeeded.
        let kuadrant = namespace_with_global_group(&client, "ctl-kuadrant").await;
        create::<capstan::api::Subscription>(&client, &kuadrant.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "kuadrant", "namespace": kuadrant.name},
        "spec": {"name": "kuadrant-operator", "channel": "stable", "source": "corpus", "sourceNamespace": catalog_ns.name}
    }))
    .await;
        let plan = plan_in_phase(&client, &kuadrant.name, "kuadrant", "Complete").await;
        let mut names = plan.spec.cluster_service_version_names.clone();
        names.sort();
        let expected = [
            "authorino-operator.v0.13.0",
            "dns-operator.v0.6.0",
            "kuadrant-operator.v0.11.1",
            "limitador-operator.v0.11.0",
        ];
        assert_eq!(names, expected, "one plan with kuadrant and its three dependencies at the required versions");
        let lookups = plan.status.as_ref().map(|s| s.bundle_lookups.clone()).unwrap_or_default();
        let kl = lookups.iter().find(|l| l.identifier == "kuadrant-operator.v0.11.1").expect("kuadrant lookup");
        let props = kl.properties.clone().unwrap_or_default();
        assert!(
            props.contains("olm.package.required") && props.contains("authorino-operator") && props.contains("olm.gvk"),
            "bundle lookup properties: {props}"
        );
        for csv in expected {
            csv_version_succeeded(&client, &kuadrant.name, csv).await;
        }
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &kuadrant.name);
        assert_eq!(
            plans.list(&Default::default()).await.expect("plans").items.len(),
            1,
            "dependencies come in the same plan"
        );

        // 4. kaiwudb-operator (AllNamespaces) with cluster-scoped RBAC; it depends on nginx-operator.
        //    Its Subscription's spec.config lands in its Deployment.
        let kaiwu = namespace_with_global_group(&client, "ctl-kaiwu").await;
        create::<capstan::api::Subscription>(&client, &kaiwu.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "kaiwudb-operator", "namespace": kaiwu.name},
        "spec": {"name": "kaiwudb-operator", "channel": "stable", "source": "examples", "sourceNamespace": catalog_ns.name,
                 "config": {
                     "env": [{"name": "LOG_LEVEL", "value": "debug"}],
                     "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "50m"}},
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
                 }}
    }))
    .await;
        plan_in_phase(&client, &kaiwu.name, "kaiwudb-operator", "Complete").await;
        csv_version_succeeded(&client, &kaiwu.name, "kaiwudb-operator.v1.2.0").await;
        csv_version_succeeded(&client, &kaiwu.name, "nginx-operator.v0.2.0").await;
        let by_owner = ListParams::default()
            .labels(&format!("olm.owner=kaiwudb-operator.v1.2.0,olm.owner.namespace={}", kaiwu.name));
        let crs = Api::<ClusterRole>::all(client.clone()).list(&by_owner).await.expect("clusterroles");
        let crbs = Api::<ClusterRoleBinding>::all(client.clone()).list(&by_owner).await.expect("clusterrolebindings");
        assert!(
            !crs.items.is_empty() && !crbs.items.is_empty(),
            "ClusterRole and ClusterRoleBinding of kaiwudb-operator"
        );
        let sa = "kaiwudb-operator-controller-manager";
        assert!(
            allowed(&client, &kaiwu.name, sa, "create", "apps", "statefulsets", Some("some-other-namespace")).await,
            "cluster-wide statefulsets from clusterPermissions"
        );
        assert!(!allowed(&client, &kaiwu.name, sa, "delete", "", "nodes", None).await, "nothing beyond the CSV");
        let kwc = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kaiwu.inspur.com", "v1", "KaiwuCluster"),
            "kaiwuclusters",
        );
        let kapi = Api::<DynamicObject>::namespaced_with(client.clone(), &kaiwu.name, &kwc);
        let good: DynamicObject = serde_json::from_value(json!({"apiVersion": "kaiwu.inspur.com/v1", "kind": "KaiwuCluster", "metadata": {"name": "db"}, "spec": {"replicas": 3, "version": "2.2.0"}})).expect("kwc");
        kapi.create(&PostParams::default(), &good).await.expect("a KaiwuCluster object is accepted");
        let bad: DynamicObject = serde_json::from_value(json!({"apiVersion": "kaiwu.inspur.com/v1", "kind": "KaiwuCluster", "metadata": {"name": "bad"}, "spec": {"replicas": 0, "version": "x"}})).expect("kwc");
        assert!(kapi.create(&PostParams::default(), &bad).await.is_err(), "the CRD's schema is enforced");
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), &kaiwu.name);
        let d = deploys
            .list(&ListParams::default().labels("olm.owner=kaiwudb-operator.v1.2.0"))
            .await
            .expect("deployments")
            .items
            .into_iter()
            .next()
            .expect("kaiwudb Deployment");
        let pod = d.spec.and_then(|s| s.template.spec).expect("pod spec");
        let c = &pod.containers[0];
        assert!(
            c.env.iter().flatten().any(|e| e.name == "LOG_LEVEL" && e.value.as_deref() == Some("debug")),
            "spec.config env: {:?}",
            c.env
        );
        let limits = c.resources.as_ref().and_then(|r| r.limits.clone()).unwrap_or_default();
        assert_eq!(limits.get("memory").map(|q| q.0.as_str()), Some("256Mi"), "spec.config resources");
        assert_eq!(
            pod.node_selector.unwrap_or_default().get("kubernetes.io/os").map(String::as_str),
            Some("linux"),
            "spec.config nodeSelector"
        );
        assert!(
            pod.tolerations.iter().flatten().any(|t| t.key.as_deref() == Some("dedicated")),
            "spec.config tolerations"
        );
        // The dependency's Deployment does not get kaiwudb's Subscription config.
        let n = deploys
            .list(&ListParams::default().labels("olm.owner=nginx-operator.v0.2.0"))
            .await
            .expect("deployments")
            .items
            .into_iter()
            .next()
            .expect("nginx Deployment");
        let nc = n.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].clone()).expect("nginx container");
        assert!(!nc.env.iter().flatten().any(|e| e.name == "LOG_LEVEL"), "config stays with its own package");

        // 5. Bad input, next to a healthy install in the same namespace (kaiwu): each ends in a
        //    condition that says what is wrong and what to do; the installed operators stay Succeeded.
        let bad_sub = |name: &str, package: &str, channel: &str, source: &str| {
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": name, "namespace": kaiwu.name},
                "spec": {"name": package, "channel": channel, "source": source, "sourceNamespace": catalog_ns.name}
            })
        };
        create::<capstan::api::Subscription>(
            &client,
            &kaiwu.name,
            bad_sub("no-package", "no-such-operator", "stable", "examples"),
        )
        .await;
        create::<capstan::api::Subscription>(
            &client,
            &kaiwu.name,
            bad_sub("no-channel", "nginx-operator", "no-such-channel", "examples"),
        )
        .await;
        create::<capstan::api::Subscription>(
            &client,
            &kaiwu.name,
            bad_sub("no-catalog", "nginx-operator", "alpha", "no-such-catalog"),
        )
        .await;
        create::<capstan::api::CatalogSource>(
            &client,
            &catalog_ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "gone", "namespace": catalog_ns.name},
                "spec": {"sourceType": "grpc", "image": format!("{registry}/{repo}/no-such-image:latest")}
            }),
        )
        .await;
        create::<capstan::api::Subscription>(
            &client,
            &kaiwu.name,
            bad_sub("no-image", "nginx-operator", "alpha", "gone"),
        )
        .await;

        let c = subscription_condition(&client, &kaiwu.name, "no-package", "ResolutionFailed", "True").await;
        let m = c["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("no-such-operator") && m.contains(&format!("{}/examples", catalog_ns.name)),
            "missing package: {m}"
        );
        let c = subscription_condition(&client, &kaiwu.name, "no-channel", "ResolutionFailed", "True").await;
        let m = c["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("no-such-channel") && m.contains("alpha"),
            "missing channel names it and the channels there are: {m}"
        );
        let c = subscription_condition(&client, &kaiwu.name, "no-catalog", "ResolutionFailed", "True").await;
        let m = c["message"].as_str().unwrap_or_default();
        assert!(m.contains("no-such-catalog") && m.contains("CatalogSource"), "missing catalog: {m}");
        let c = subscription_condition(&client, &kaiwu.name, "no-image", "ResolutionFailed", "True").await;
        let m = c["message"].as_str().unwrap_or_default();
        assert!(m.contains("no-such-image") && m.contains("gone"), "missing catalog image: {m}");
        let c = subscription_condition(&client, &kaiwu.name, "no-image", "CatalogSourcesUnhealthy", "True").await;
        assert!(c["message"].as_str().is_some_and(|m| m.contains("no-such-image")), "{c}");

        // Nothing else broke: no plan for the bad Subscriptions, the installed CSVs stay Succeeded and
        // their Subscription stays AtLatestKnown.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &kaiwu.name);
        assert_eq!(
            plans.list(&Default::default()).await.expect("plans").items.len(),
            1,
            "no InstallPlan for the bad Subscriptions"
        );
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &kaiwu.name);
        for csv in ["kaiwudb-operator.v1.2.0", "nginx-operator.v0.2.0"] {
            let st = serde_json::to_value(csvs.get(csv).await.expect("csv").status).expect("status");
            assert_eq!(st["phase"], "Succeeded", "{csv}: {st}");
        }
        let subs: Api<capstan::api::Subscription> = Api::namespaced(client.clone(), &kaiwu.name);
        eventually("kaiwudb Subscription AtLatestKnown", WAIT, || async {
            let st = serde_json::to_value(subs.get("kaiwudb-operator").await.ok()?.status?).ok()?;
            (st["state"] == "AtLatestKnown").then_some(())
        })
        .await;
        // nginx-operator (kaiwudb's dependency) is installed below in OwnNamespace groups: with
        // kaiwu's AllNamespaces group still providing Nginx that is an InterOperatorGroupOwnerConflict.
        release_group(&client, &kaiwu.name).await;

        // case-25: a scoped install (OperatorGroup spec.serviceAccountName) whose
        // ServiceAccount lacks three permissions fails before any step and lists all three; once
        // they are granted the same plan goes through, applied as that ServiceAccount.
        let scoped = TestNamespace::new(&client, "ctl-scoped").await;
        let sa: k8s_openapi::api::core::v1::ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "installer", "namespace": scoped.name}})).expect("sa");
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &scoped.name)
            .create(&PostParams::default(), &sa)
            .await
            .expect("create installer SA");
        let grant = |name: String, rules: serde_json::Value| {
            let client = client.clone();
            let ns = scoped.name.clone();
            async move {
                let cr: ClusterRole = serde_json::from_value(
                    json!({"metadata": {"name": name, "labels": {"capstan-test": ns}}, "rules": rules}),
                )
                .expect("cr");
                Api::<ClusterRole>::all(client.clone())
                    .create(&PostParams::default(), &cr)
                    .await
                    .expect("create ClusterRole");
                let crb: ClusterRoleBinding = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"capstan-test": ns}},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]
                }))
                .expect("crb");
                Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&PostParams::default(), &crb)
                    .await
                    .expect("create ClusterRoleBinding");
            }
        };
        let all = json!(["get", "list", "watch", "create", "update", "patch", "delete"]);
        grant(format!("{}-installer", scoped.name), json!([
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": all},
        {"apiGroups": [""], "resources": ["serviceaccounts", "services", "configmaps", "secrets", "events", "pods"], "verbs": all},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": all},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": all},
        {"apiGroups": ["operators.coreos.com"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["example.com"], "resources": ["nginxes", "nginxes/status", "nginxes/finalizers"], "verbs": all},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ])).await;
        let og: capstan::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": scoped.name}, "spec": {"targetNamespaces": [scoped.name], "serviceAccountName": "installer"}
    }))
    .expect("og");
        Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &scoped.name)
            .create(&PostParams::default(), &og)
            .await
            .expect("create OperatorGroup");
        subscribe(&client, &scoped.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        let refused = plan_in_phase(&client, &scoped.name, "nginx-operator", "Failed").await;
        let m = refused.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            m.contains(&format!("installer account {}/installer", scoped.name)) && m.contains("lacks 3 permissions"),
            "{m}"
        );
        assert!(
            m.contains("ingresses") && m.contains("leases") && m.contains("subjectaccessreviews"),
            "all three in one message: {m}"
        );
        assert!(
            Api::<ClusterServiceVersion>::namespaced(client.clone(), &scoped.name)
                .list(&Default::default())
                .await
                .expect("csvs")
                .items
                .is_empty(),
            "nothing applied"
        );
        assert!(
            Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &scoped.name)
                .get_opt("nginx-operator-controller-manager")
                .await
                .expect("sa")
                .is_none(),
            "nothing applied"
        );
        grant(
            format!("{}-installer-more", scoped.name),
            json!([
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": all},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
            ]),
        )
        .await;
        csv_version_succeeded(&client, &scoped.name, "nginx-operator.v0.2.0").await;
        // A ServiceAccount that does not exist is named as such.
        let nosa = TestNamespace::new(&client, "ctl-scoped-nosa").await;
        let og: capstan::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": nosa.name}, "spec": {"targetNamespaces": [nosa.name], "serviceAccountName": "nobody"}
    }))
    .expect("og");
        Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &nosa.name)
            .create(&PostParams::default(), &og)
            .await
            .expect("create OperatorGroup");
        subscribe(&client, &nosa.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        let refused = plan_in_phase(&client, &nosa.name, "nginx-operator", "Failed").await;
        let m = refused.status.and_then(|s| s.message).unwrap_or_default();
        assert!(m.contains(&format!("ServiceAccount {}/nobody", nosa.name)) && m.contains("does not exist"), "{m}");

        controller.abort();
        let test_rbac = ListParams::default().labels(&format!("capstan-test={}", scoped.name));
        let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete_collection(&Default::default(), &test_rbac).await;
        let _ = Api::<ClusterRole>::all(client.clone()).delete_collection(&Default::default(), &test_rbac).await;
        cleanup_cluster_rbac(&client, &[&kuadrant.name, &kaiwu.name, &scoped.name]).await;
    })
}
