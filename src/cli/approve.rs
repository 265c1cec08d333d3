//! `capstan approve SUBSCRIPTION|PLAN [-n NAMESPACE]`: prints the InstallPlan's steps, then sets
//! `spec.approved=true` (the same as `kubectl patch installplan … -p '{"spec":{"approved":true}}'`;
//! `reference/olm-v0.md` §1.4).
//!
//! A Subscription name is followed to its `status.installPlanRef`. Exit codes: 0 approved (or
//! already approved), 1 nothing to approve (no such plan, or the Subscription has none yet),
//! 2 no cluster configuration / API error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use capstan::api::{InstallPlan, Subscription};

#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// An InstallPlan name, or a Subscription name whose current InstallPlan is approved.
    name: String,
    /// Namespace of the InstallPlan / Subscription.
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
    /// Kubeconfig file; default: $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
}

/// `println!` that does not stop the command when stdout is a closed pipe: the approval must not
/// depend on whether anyone reads the listing (other write errors are reported on stderr).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*)
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            eprintln!("warning: cannot write to stdout: {e}");
        }
    }};
}

pub fn run(args: ApproveArgs) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(approve(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

async fn approve(args: &ApproveArgs) -> Result<(), (u8, String)> {
    let client = super::controller::client(args.kubeconfig.as_ref()).await.map_err(|e| (2, e))?;
    let ns = &args.namespace;
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    let api_err = |what: String| move |e: kube::Error| (2u8, format!("{what}: {e}"));
    let plan = match plans
        .get_opt(&args.name)
        .await
        .map_err(api_err(format!("reading InstallPlan {ns}/{}", args.name)))?
    {
        Some(p) => p,
        None => {
            let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
            let Some(sub) =
                subs.get_opt(&args.name).await.map_err(api_err(format!("reading Subscription {ns}/{}", args.name)))?
            else {
                return Err((
                    1,
                    format!(
                        "no InstallPlan or Subscription named {} in namespace {ns}; list them with `kubectl get installplan,subscription -n {ns}`",
                        args.name
                    ),
                ));
            };
            let Some(plan_name) =
                sub.status.as_ref().and_then(|s| s.install_plan_ref.as_ref()).and_then(|r| r.name.clone())
            else {
                return Err((
                    1,
                    format!(
                        "Subscription {ns}/{} has no InstallPlan yet (status.installPlanRef is empty); see its status.conditions",
                        args.name
                    ),
                ));
            };
            plans
                .get_opt(&plan_name)
                .await
                .map_err(api_err(format!("reading InstallPlan {ns}/{plan_name}")))?
                .ok_or_else(|| {
                    (1, format!("InstallPlan {ns}/{plan_name} named by Subscription {} does not exist", args.name))
                })?
        }
    };
    let name = plan.metadata.name.clone().unwrap_or_default();
    let phase = plan
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(&s.phase).ok())
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    say!("InstallPlan {ns}/{name}: {} ({phase})", plan.spec.cluster_service_version_names.join(", "));
    let steps = plan.status.as_ref().map(|s| s.plan.as_slice()).unwrap_or_default();
    if steps.is_empty() {
        say!("  (no steps planned yet)");
    }
    for (i, step) in steps.iter().enumerate() {
        let r = &step.resource;
        let gv = if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
        say!("  {:>3}. {} {} {} (for {})", i + 1, gv, r.kind, r.name, step.resolving);
    }
    if plan.spec.approved {
        say!("already approved");
        return Ok(());
    }
    plans
        .patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"approved": true}})))
        .await
        .map_err(api_err(format!("approving InstallPlan {ns}/{name}")))?;
    say!("approved InstallPlan {ns}/{name}");
    Ok(())
}
