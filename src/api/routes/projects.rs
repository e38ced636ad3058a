//! `/v1/projects`: Planned-Use fair share's allocations (admin) and each project's usage (see
//! [`crate::fairshare`]).
//!
//! Every user belongs to one project: the one whose `members` name them, else the project named
//! like the user (which has no allocation unless an admin gives it one). A project's plans are
//! charged to its allocation when they commit (a plan past it is rejected, `allocation
//! exceeded`, unless the allocation allows `overdraft`), and its priority orders the requests
//! waiting for a planning permit.

use actix_web::web;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::auth::Caller;
use crate::api::extract::{Admin, Body, Guarded};
use crate::api::problem::ApiError;
use crate::api::state::AppState;
use crate::fairshare::{Allocation, Project, UsageReport};
use crate::model::to_time;

/// `PUT /v1/projects/{id}` body. Unknown fields are refused.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectBody {
    pub allocation: Allocation,
    /// The users whose plans count against the project (naming a user here moves them from
    /// their previous project).
    #[serde(default)]
    pub members: Vec<String>,
}

/// Create or replace a project's allocation and members (admin).
#[utoipa::path(put, path = "/v1/projects/{id}", operation_id = "put_project", tag = "projects",
    params(("id" = String, Path, description = "1-128 characters, no control characters")),
    request_body = ProjectBody,
    responses(
        (status = 200, body = Project),
        (status = 403, description = "Not an admin"),
        (status = 422, description = "An allocation out of range (negative or non-finite hours, period_s <= 0), a bad id or member"),
    ),
    security(("bearer" = [])))]
pub async fn put(
    state: web::Data<AppState>,
    g: Guarded<Admin, web::Path<String>, Body<ProjectBody>>,
) -> Result<web::Json<Project>, ApiError> {
    let Guarded { path: id, body: Body(body), .. } = g;
    let project = Project { id: id.into_inner(), allocation: body.allocation, members: body.members };
    project.validate().map_err(ApiError::invalid)?;
    // Stored first, then applied: a project the store refused is not in force. Projects that
    // lose a member to this one are stored again too. The store is the truth every planner
    // process reads (the ledger of each is a cache).
    let before = state.store.projects().await?;
    let moved: Vec<Project> = before
        .into_iter()
        .filter(|p| p.id != project.id && p.members.iter().any(|m| project.members.contains(m)))
        .map(|mut p| {
            p.members.retain(|m| !project.members.contains(m));
            p
        })
        .collect();
    state.store.save_project(&project).await?;
    for p in &moved {
        state.store.save_project(p).await?;
    }
    state.ledger.set_project(project.clone()).map_err(ApiError::invalid)?;
    Ok(web::Json(project))
}

/// Every project with an allocation (admin).
#[utoipa::path(get, path = "/v1/projects", operation_id = "list_projects", tag = "projects",
    responses(
        (status = 200, body = Vec<Project>),
        (status = 403, description = "Not an admin"),
    ),
    security(("bearer" = [])))]
pub async fn list(state: web::Data<AppState>, _: Guarded<Admin>) -> Result<web::Json<Vec<Project>>, ApiError> {
    Ok(web::Json(fresh_projects(&state).await?))
}

/// Every project as stored (the truth, whatever planner process set it), also refreshed into
/// this process's ledger (a cache, for the priorities).
pub async fn fresh_projects(state: &AppState) -> Result<Vec<Project>, ApiError> {
    let projects = state.store.projects().await?;
    for p in &projects {
        if state.ledger.project(&p.id).as_ref() != Some(p) {
            state.ledger.set_project(p.clone()).map_err(|e| ApiError::internal(e.to_string()))?;
        }
    }
    Ok(projects)
}

/// The caller may read project `id`: an admin, or a member (a user's own project included).
/// Members are named: a certified caller (a planner by its client certificate) is no token
/// principal's namesake, so it is no member.
fn may_read(projects: &[Project], caller: &Caller, id: &str) -> Result<(), ApiError> {
    if caller.admin || (!caller.certified && crate::fairshare::project_of(projects, &caller.user).0 == id) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("only its members and admins may read project `{id}`")))
    }
}

/// A project's allocation and members (admin or member).
#[utoipa::path(get, path = "/v1/projects/{id}", operation_id = "get_project", tag = "projects",
    params(("id" = String, Path)),
    responses(
        (status = 200, body = Project),
        (status = 403, description = "Neither an admin nor a member"),
        (status = 404, description = "No allocation for this project"),
    ),
    security(("bearer" = [])))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<web::Json<Project>, ApiError> {
    let projects = fresh_projects(&state).await?;
    may_read(&projects, &caller, &id)?;
    projects
        .into_iter()
        .find(|p| p.id == *id)
        .map(web::Json)
        .ok_or_else(|| ApiError::not_found(format!("no project `{id}`")))
}

/// A project's fair-share standing now: allocation, entitled CPUs `R_i`, usage index `u_i`,
/// priority `p_i`, and CPU- and GPU-hours booked in the current period against those allocated
/// (admin or member). A project without an allocation answers too (entitled rate 0).
#[utoipa::path(get, path = "/v1/projects/{id}/usage", operation_id = "project_usage", tag = "projects",
    params(("id" = String, Path)),
    responses(
        (status = 200, body = UsageReport),
        (status = 403, description = "Neither an admin nor a member"),
    ),
    security(("bearer" = [])))]
pub async fn usage(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<web::Json<UsageReport>, ApiError> {
    let projects = fresh_projects(&state).await?;
    may_read(&projects, &caller, &id)?;
    let now = to_time(&state.now_utc());
    let mut report = state.ledger.report(&id, now);
    // The bookings of the current period from the store's charges: every planner's.
    let (ps, pe) = match &report.allocation {
        Some(a) => a.period_of(now),
        None => Allocation::cpu_hours(0.0).period_of(now),
    };
    let (c, g) = state.store.charged(&id, ps, pe).await?.iter().fold((0.0, 0.0), |(c, g), u| {
        let (uc, ug) = u.inside(ps, pe);
        (c + uc / 3600.0, g + ug / 3600.0)
    });
    (report.booked_cpu_hours, report.booked_gpu_hours) = (c, g);
    Ok(web::Json(report))
}
