//! The local control plane is a real Kubernetes — scheduling onto a kwok node,
//! RBAC enforcement with ServiceAccount tokens, garbage collection, CRD validation.

use std::time::Duration;

use crate::support::{TestNamespace, eventually};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const MANAGER: &str = "capstan-tests";

fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("test object")
}

#[test]
fn deployment_becomes_available_on_the_kwok_node() {
    crate::support::run("env_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "env-deploy").await;
        let api: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
        let dep: Deployment = obj(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "registry.local/web:1"}]}
                }
            }
        }));
        api.patch("web", &PatchParams::apply(MANAGER), &Patch::Apply(&dep)).await.expect("apply deployment");
        let available = eventually("Deployment web Available", Duration::from_secs(90), || async {
            let d = api.get("web").await.ok()?;
            let st = d.status?;
            let ok = st.conditions?.iter().any(|c| c.type_ == "Available" && c.status == "True");
            (ok && st.available_replicas == Some(2)).then_some(st.available_replicas)
        })
        .await;
        assert_eq!(available, Some(2));
        // The pods really were scheduled onto the fake node.
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns.name);
        let list = pods.list(&ListParams::default().labels("app=web")).await.expect("list pods");
        assert_eq!(list.items.len(), 2);
        for p in list.items {
            assert_eq!(p.spec.and_then(|s| s.node_name).as_deref(), Some("kwok-node-0"));
        }
    })
}

async fn can_list_secrets(client: &kube::Client, ns: &str, user: &str) -> bool {
    let sar: SubjectAccessReview = obj(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}")],
                 "resourceAttributes": {"namespace": ns, "verb": "list", "resource": "secrets"}}
    }));
    let r = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("create SubjectAccessReview");
    r.status.map(|s| s.allowed).unwrap_or(false)
}

#[test]
fn rbac_is_enforced_for_service_account_tokens() {
    crate::support::run("env_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "env-rbac").await;
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
        sas.create(&PostParams::default(), &obj(json!({"metadata": {"name": "reader"}}))).await.expect("create sa");
        let user = format!("system:serviceaccount:{}:reader", ns.name);

        // A real token for the account, from the TokenRequest API.
        let tr: TokenRequest = obj(json!({"spec": {"audiences": [], "expirationSeconds": 600}}));
        let tr = sas.create_token_request("reader", &PostParams::default(), &tr).await.expect("TokenRequest");
        let token = tr.status.and_then(|s| s.token).expect("TokenRequest returned a token");
        let as_reader = crate::support::client_with_token(&token).await;
        let secrets_as_reader: Api<Secret> = Api::namespaced(as_reader, &ns.name);

        // No binding: denied, by SubjectAccessReview and by a real request.
        assert!(!can_list_secrets(&client, &ns.name, &user).await, "unbound ServiceAccount must not list secrets");
        match secrets_as_reader.list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "expected Forbidden, got {s:?}"),
            other => panic!("expected Forbidden for {user}, got {other:?}"),
        }

        // Bind a Role that allows listing Secrets: allowed.
        let roles: Api<Role> = Api::namespaced(client.clone(), &ns.name);
        roles
            .create(
                &PostParams::default(),
                &obj(json!({"metadata": {"name": "secret-reader"},
                        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]})),
            )
            .await
            .expect("create role");
        let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
        rbs.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "reader-secrets"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-reader"},
                    "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns.name}]})),
        )
        .await
        .expect("create rolebinding");
        eventually("SubjectAccessReview allows list secrets", Duration::from_secs(20), || async {
            can_list_secrets(&client, &ns.name, &user).await.then_some(())
        })
        .await;
        let listed = eventually("reader lists secrets", Duration::from_secs(20), || async {
            secrets_as_reader.list(&ListParams::default()).await.ok()
        })
        .await;
        assert!(
            listed.items.is_empty() || listed.items.iter().all(|s| s.metadata.namespace.as_deref() == Some(&ns.name))
        );
        // Still nothing beyond the grant: the same account cannot delete Secrets.
        let sar: SubjectAccessReview = obj(json!({
            "spec": {"user": user, "resourceAttributes": {"namespace": ns.name, "verb": "delete", "resource": "secrets"}}
        }));
        let r = Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &sar).await.unwrap();
        assert!(!r.status.unwrap().allowed, "the Role grants get/list only");
    })
}

#[test]
fn deleting_an_owner_garbage_collects_its_dependent() {
    crate::support::run("env_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "env-gc").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
        let owner = cms
            .create(&PostParams::default(), &obj(json!({"metadata": {"name": "owner"}, "data": {"k": "v"}})))
            .await
            .expect("create owner");
        let uid = owner.metadata.uid.expect("owner uid");
        cms.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "dependent",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}})),
        )
        .await
        .expect("create dependent");
        cms.delete("owner", &Default::default()).await.expect("delete owner");
        eventually("dependent ConfigMap garbage-collected", Duration::from_secs(60), || async {
            matches!(cms.get_opt("dependent").await, Ok(None)).then_some(())
        })
        .await;
    })
}

#[test]
fn crd_applied_server_side_is_established_and_enforces_its_schema() {
    crate::support::run("env_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "env-crd").await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd: CustomResourceDefinition = obj(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.envtest.capstan.dev"},
            "spec": {
                "group": "envtest.capstan.dev", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "required": ["size"],
                        "properties": {"size": {"type": "integer", "minimum": 1, "maximum": 10}}}}
                }}}]
            }
        }));
        crds.patch("widgets.envtest.capstan.dev", &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd))
            .await
            .expect("server-side apply CRD");
        let established = kube::runtime::wait::await_condition(
            crds.clone(),
            "widgets.envtest.capstan.dev",
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established).await.expect("CRD Established in 30s").unwrap();

        let gvk = GroupVersionKind::gvk("envtest.capstan.dev", "v1", "Widget");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
        let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
        let good: DynamicObject = obj(json!({"apiVersion": "envtest.capstan.dev/v1", "kind": "Widget",
        "metadata": {"name": "good"}, "spec": {"size": 3}}));
        // Discovery of a new CRD can lag a moment behind Established.
        eventually("a valid Widget is accepted", Duration::from_secs(20), || async {
            widgets.create(&PostParams::default(), &good).await.ok()
        })
        .await;
        let bad: DynamicObject = obj(json!({"apiVersion": "envtest.capstan.dev/v1", "kind": "Widget",
        "metadata": {"name": "bad"}, "spec": {"size": 99}}));
        match widgets.create(&PostParams::default(), &bad).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "expected Invalid, got {s:?}");
                assert!(s.message.contains("spec.size"), "message names the field: {}", s.message);
            }
            other => panic!("a Widget with size 99 must be rejected by the schema, got {other:?}"),
        }
        let missing: DynamicObject = obj(json!({"apiVersion": "envtest.capstan.dev/v1", "kind": "Widget",
        "metadata": {"name": "missing"}, "spec": {}}));
        let err = widgets.create(&PostParams::default(), &missing).await.expect_err("required field");
        assert!(err.to_string().contains("spec.size"), "{err}");
        crds.delete("widgets.envtest.capstan.dev", &Default::default()).await.ok();
    })
}
