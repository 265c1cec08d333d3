use super::*;
use serde_json::json;

fn step(kind: &str, group: &str, namespace: Option<&str>, name: &str, extra: Value) -> Step {
    let mut manifest = json!({"kind": kind, "metadata": {"name": name}});
    if let (Some(m), Some(e)) = (manifest.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    Step {
        resolving: "op.v1".into(),
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
        namespace: namespace.map(String::from),
        manifest,
    }
}

fn role(ns: &str, name: &str, rules: Value) -> Step {
    step("Role", RBAC_GROUP, Some(ns), name, json!({"rules": rules}))
}

fn binding(kind: &str, ns: Option<&str>, name: &str, role_kind: &str, role_name: &str) -> Step {
    step(kind, RBAC_GROUP, ns, name, json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role_name}}))
}

fn rule(v: Value) -> PolicyRule {
    serde_json::from_value(v).unwrap()
}

/// Drives [`evaluate`] to the end with an oracle for the answers and the cluster's roles, as
/// [`findings`] does with the API server; returns the findings and every question asked.
fn run(
    steps: &[Step],
    allowed: impl Fn(&Question) -> bool,
    cluster: impl Fn(&RoleKey) -> RoleRead,
) -> (Vec<Finding>, Vec<Question>) {
    let mut known = Known::default();
    let mut asked = Vec::new();
    for _ in 0..10 {
        match evaluate(steps, &known) {
            Progress::Done(f) => return (f, asked),
            Progress::Ask { questions, roles } => {
                assert!(!questions.is_empty() || !roles.is_empty(), "Ask with nothing to ask");
                for q in questions {
                    assert!(!known.answers.contains_key(&q), "asked twice: {q}");
                    known.answers.insert(q.clone(), allowed(&q));
                    asked.push(q);
                }
                for r in roles {
                    let read = cluster(&r);
                    known.roles.insert(r, read);
                }
            }
        }
    }
    panic!("evaluate did not finish in 10 rounds");
}

fn verb_is(q: &Question, verb: &str, resource: &str) -> bool {
    matches!(q, Question::Resource { verb: v, resource: r, .. } if v == verb && r == resource)
}

fn no_roles(_: &RoleKey) -> RoleRead {
    RoleRead::Absent
}

#[test]
fn rules_expand_to_one_question_per_permission() {
    let r =
        rule(json!({"apiGroups": ["", "apps"], "resources": ["pods/exec", "deployments"], "verbs": ["get", "create"]}));
    let qs = Question::from_rule(&r, Some("ns1"));
    assert_eq!(qs.len(), 8);
    assert!(qs.contains(&Question::Resource {
        verb: "create".into(),
        group: "".into(),
        resource: "pods".into(),
        subresource: Some("exec".into()),
        name: None,
        namespace: Some("ns1".into())
    }));
    let r = rule(json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"], "verbs": ["get"]}));
    let shown: Vec<String> = Question::from_rule(&r, None).iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["get on secrets a cluster-wide", "get on secrets b cluster-wide"]);
    let r = rule(json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}));
    assert_eq!(
        Question::from_rule(&r, None),
        vec![Question::NonResource { verb: "get".into(), path: "/metrics".into() }]
    );
    assert_eq!(Question::from_rule(&r, None)[0].to_string(), "get on non-resource URL /metrics");
    let q = Question::from_rule(
        &rule(json!({"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["list"]})),
        Some("ns"),
    );
    assert_eq!(q[0].to_string(), "list on deployments/scale.apps in namespace ns");
}

#[test]
fn a_subject_allowed_everything_has_no_findings_and_is_not_asked_about_rules() {
    let steps = vec![
        step("ServiceAccount", "", Some("ns"), "op", json!({})),
        role("ns", "op", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])),
        binding("RoleBinding", Some("ns"), "op", "Role", "op"),
        binding("ClusterRoleBinding", None, "op-view", "ClusterRole", "view"),
    ];
    let (findings, asked) = run(&steps, |_| true, |_| panic!("no role is read when bind is allowed"));
    assert!(findings.is_empty(), "{findings:?}");
    assert!(
        !asked.iter().any(|q| verb_is(q, "list", "pods")),
        "escalate allowed: the role's rules are not asked: {asked:?}"
    );
    assert!(asked.iter().any(|q| verb_is(q, "escalate", "roles")));
    assert!(asked.contains(&Question::resource("bind", RBAC_GROUP, "clusterroles", None).named("view")));
}

#[test]
fn refused_applies_name_the_verbs_the_resource_and_the_step() {
    let steps = vec![
        step("Deployment", "apps", Some("ns"), "op", json!({})),
        step("CustomResourceDefinition", "apiextensions.k8s.io", None, "widgets.example.com", json!({})),
    ];
    let (findings, _) = run(
        &steps,
        |q| {
            !(verb_is(q, "create", "deployments")
                || verb_is(q, "patch", "deployments")
                || q.target().starts_with("customresourcedefinitions"))
        },
        no_roles,
    );
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns\" (nor patch) (for Deployment ns/op)",
            "cannot create resource \"customresourcedefinitions\" in API group \"apiextensions.k8s.io\" at the cluster scope (nor get, patch) (for CustomResourceDefinition widgets.example.com)",
        ]
    );
    assert!(findings.iter().all(|f| f.need == Need::Apply));
}

#[test]
fn a_role_without_escalate_lists_each_rule_the_subject_does_not_hold() {
    let steps = vec![role(
        "ns",
        "op",
        json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get"]}
        ]),
    )];
    let held = |q: &Question| {
        !(verb_is(q, "escalate", "roles") || q.target().starts_with("leases") || verb_is(q, "get", "ingresses"))
    };
    let (findings, _) = run(&steps, held, no_roles);
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"ns\" (nor watch) (to grant this rule of Role ns/op it must hold it, or have escalate on roles)",
            "cannot get resource \"ingresses\" in API group \"networking.k8s.io\" in the namespace \"ns\" (to grant this rule of Role ns/op it must hold it, or have escalate on roles)",
        ]
    );
    assert_eq!(findings[0].need, Need::Grant { roles: "roles" });
}

#[test]
fn a_binding_to_a_role_the_plan_creates_without_escalate_is_covered_by_the_roles_findings() {
    let steps = vec![
        role("ns", "op", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])),
        binding("RoleBinding", Some("ns"), "op", "Role", "op"),
    ];
    let held = |q: &Question| {
        !(verb_is(q, "escalate", "roles") || verb_is(q, "bind", "roles") || verb_is(q, "get", "secrets"))
    };
    let (findings, _) = run(&steps, held, |_| panic!("the plan's role is not read"));
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].need, Need::Grant { roles: "roles" });
}

#[test]
fn a_binding_to_a_role_the_plan_creates_with_escalate_needs_bind_or_the_roles_rules() {
    let steps = vec![
        role("ns", "op", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])),
        binding("RoleBinding", Some("ns"), "op", "Role", "op"),
    ];
    let held = |q: &Question| !(verb_is(q, "bind", "roles") || verb_is(q, "get", "secrets"));
    let (findings, _) = run(&steps, held, |_| panic!("the plan's role is not read"));
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "cannot get resource \"secrets\" in API group \"\" in the namespace \"ns\" (to create RoleBinding ns/op, which grants Role op, it must hold every permission of Role op, or have bind on roles op)"
        ]
    );
    assert_eq!(
        findings[0].need,
        Need::Bind {
            role: RoleKey { kind: "Role".into(), namespace: Some("ns".into()), name: "op".into() },
            found: RoleFound::InPlan
        }
    );
    // Holding the role's rules allows the binding without bind.
    let (findings, _) = run(&steps, |q| !verb_is(q, "bind", "roles"), |_| panic!("not read"));
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn a_binding_to_a_cluster_role_is_checked_against_the_roles_rules_on_the_cluster() {
    let steps = vec![binding("ClusterRoleBinding", None, "op-view", "ClusterRole", "view")];
    let view = || {
        RoleRead::Rules(vec![rule(
            json!({"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list"]}),
        )])
    };
    let held = |q: &Question| !(verb_is(q, "bind", "clusterroles") || verb_is(q, "list", "configmaps"));
    let (findings, _) = run(&steps, held, |r| {
        assert_eq!(r, &RoleKey { kind: "ClusterRole".into(), namespace: None, name: "view".into() });
        view()
    });
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "cannot list resource \"configmaps\" in API group \"\" at the cluster scope (to create ClusterRoleBinding op-view, which grants ClusterRole view, it must hold every permission of ClusterRole view, or have bind on clusterroles view)"
        ]
    );
    // A RoleBinding to the same ClusterRole grants it only in its namespace: asked there.
    let steps = vec![binding("RoleBinding", Some("ns"), "op-view", "ClusterRole", "view")];
    let (findings, _) = run(&steps, held, |_| view());
    assert_eq!(findings[0].missing, vec![Question::resource("list", "", "configmaps", Some("ns"))]);
}

#[test]
fn a_binding_to_a_role_nobody_has_or_nobody_may_read_needs_bind() {
    let steps = vec![binding("RoleBinding", Some("ns"), "op", "Role", "gone")];
    let refuse_bind = |q: &Question| !verb_is(q, "bind", "roles");
    let (findings, _) = run(&steps, refuse_bind, no_roles);
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "cannot bind resource \"roles\" named \"gone\" in API group \"rbac.authorization.k8s.io\" in the namespace \"ns\" (for RoleBinding ns/op: Role gone is neither in the plan nor on the cluster, so only bind allows the binding)"
        ]
    );
    let (findings, _) = run(&steps, refuse_bind, |_| RoleRead::Unreadable("roles \"gone\" is forbidden".into()));
    assert_eq!(
        findings[0].need,
        Need::Bind {
            role: RoleKey { kind: "Role".into(), namespace: Some("ns".into()), name: "gone".into() },
            found: RoleFound::Unreadable("roles \"gone\" is forbidden".into())
        }
    );
    assert!(findings[0].to_string().contains("could not be read (roles \"gone\" is forbidden)"), "{}", findings[0]);
}

#[test]
fn one_message_for_every_caller() {
    let f = |step: &str| Finding {
        step: step.into(),
        need: Need::Apply,
        missing: vec![Question::resource("create", "apps", "deployments", Some("ns"))],
    };
    assert_eq!(
        describe("ServiceAccount ns/installer", "ServiceAccount ns/installer", &[f("Deployment ns/a")]),
        "ServiceAccount ns/installer lacks 1 permission needed by this plan; nothing was applied: (1) cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns\" (for Deployment ns/a); grant them to ServiceAccount ns/installer"
    );
    let err = PreflightError::Missing {
        who: "user \"bob\"".into(),
        findings: vec![f("Deployment ns/a"), f("Deployment ns/b")],
    };
    assert_eq!(
        err.to_string(),
        "user \"bob\" lacks 2 permissions needed by this plan; nothing was applied: (1) cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns\" (for Deployment ns/a); (2) cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns\" (for Deployment ns/b); grant them to user \"bob\""
    );
}

#[test]
fn a_service_account_is_the_user_and_groups_the_api_server_gives_its_tokens() {
    let sa = ServiceAccount { namespace: "ns1".into(), name: "op".into() };
    assert_eq!(sa.user(), "system:serviceaccount:ns1:op");
    assert_eq!(
        sa.groups(),
        ["system:serviceaccounts".to_string(), "system:serviceaccounts:ns1".into(), "system:authenticated".into()]
    );
}
