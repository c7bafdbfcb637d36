//! ScheduleService adapter: checks the client token (and the client's limits, as
//! SearchService does), validates with `lps_proto::model`, checks what only the coordinator
//! knows (configured destinations; the minimum interval and enabled malls are
//! [`Schedules::create`]'s), calls [`Schedules`], and translates the answers to `pb::`.
//! Another client's schedule is NOT_FOUND, as if it did not exist; an admin sees all.

use std::{sync::Arc, time::Duration};

use lps_proto::{
    model::{ScheduleSpec, Timing, duration_to_pb, timestamp_to_pb},
    pb::{self, schedule_service_server::ScheduleServiceServer},
};
use tonic::{Request, Response, Status};
use tracing::info;

use super::{
    invalid,
    limits::{Admitted, ClientLimits},
    paging,
    search::{check_destinations, list_scope, positive},
    status,
};
use crate::{
    auth::{Caller, Tokens},
    delivery::Destinations,
    schedule::{Schedule, Schedules},
};

/// ListSchedules page size when the caller gives none, and the most it may ask for.
const DEFAULT_LIST_PAGE: u32 = 50;
const MAX_LIST_PAGE: u32 = 500;

/// The ScheduleService implementation.
#[derive(Debug, Clone)]
pub struct ScheduleApi {
    schedules: Schedules,
    tokens: Arc<Tokens>,
    limits: ClientLimits,
    destinations: Arc<Destinations>,
    /// `LPS_SCHEDULE_MIN_INTERVAL`.
    min_interval: Duration,
}

impl ScheduleApi {
    pub fn new(schedules: Schedules, tokens: Arc<Tokens>, min_interval: Duration) -> Self {
        Self {
            schedules,
            tokens,
            limits: ClientLimits::default(),
            destinations: Arc::default(),
            min_interval,
        }
    }

    /// The destinations schedules may name (`LPS_DESTINATIONS`).
    #[must_use]
    pub fn with_destinations(mut self, destinations: Destinations) -> Self {
        self.destinations = Arc::new(destinations);
        self
    }

    /// Per-client rate and concurrency limits (default: none).
    #[must_use]
    pub fn with_limits(mut self, limits: ClientLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn into_service(self) -> ScheduleServiceServer<Self> {
        ScheduleServiceServer::new(self)
    }

    /// The caller of a call, admitted under its limits (held for the call).
    fn admit<T>(&self, request: &Request<T>) -> Result<(Caller, Admitted), Status> {
        let caller = self.tokens.caller(request.metadata())?;
        let admitted = self.limits.admit(&caller.name)?;
        Ok((caller, admitted))
    }

    async fn pause(&self, caller: &Caller, id: i64, paused: bool) -> Result<Schedule, Status> {
        let id = positive("schedule_id", id)?;
        let schedule = self
            .schedules
            .pause_if_owned(id, paused, caller.scope())
            .await
            .map_err(status)?;
        info!(schedule.id = id, paused, client = %caller.name, "schedule paused or resumed");
        Ok(schedule)
    }
}

#[tonic::async_trait]
impl pb::schedule_service_server::ScheduleService for ScheduleApi {
    async fn create_schedule(
        &self,
        request: Request<pb::CreateScheduleRequest>,
    ) -> Result<Response<pb::CreateScheduleResponse>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let spec = ScheduleSpec::try_from(request.into_inner()).map_err(invalid)?;
        check_destinations(&self.destinations, &spec.destinations)?;
        let (schedule, replayed) = self
            .schedules
            .create(&spec, &caller.name, self.min_interval)
            .await
            .map_err(status)?;
        info!(
            schedule.id = schedule.schedule_id,
            client = %caller.name,
            products = schedule.products.len() as i64,
            replayed,
            "schedule accepted"
        );
        Ok(Response::new(pb::CreateScheduleResponse {
            schedule: Some(schedule_to_pb(&schedule)),
            replayed,
        }))
    }

    async fn get_schedule(
        &self,
        request: Request<pb::GetScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = positive("schedule_id", request.into_inner().schedule_id)?;
        let schedule = self
            .schedules
            .get(id, caller.scope())
            .await
            .map_err(status)?;
        Ok(Response::new(schedule_to_pb(&schedule)))
    }

    async fn list_schedules(
        &self,
        request: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let req = request.into_inner();
        let client = list_scope(&caller, &req.client, "schedules")?;
        let limit = paging::page_size(req.page_size, DEFAULT_LIST_PAGE, MAX_LIST_PAGE);
        let filter = client.unwrap_or("*");
        let before = paging::decode_id(&req.page_token, "schedules", filter).map_err(invalid)?;
        let page = self
            .schedules
            .list(client, before, limit)
            .await
            .map_err(status)?;
        let next_page_token = match page.items.last() {
            Some(last) if page.more => {
                paging::encode("schedules", filter, &last.schedule_id.to_string())
            }
            _ => String::new(),
        };
        Ok(Response::new(pb::ListSchedulesResponse {
            schedules: page.items.iter().map(schedule_to_pb).collect(),
            next_page_token,
        }))
    }

    async fn pause_schedule(
        &self,
        request: Request<pb::PauseScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = request.into_inner().schedule_id;
        let schedule = self.pause(&caller, id, true).await?;
        Ok(Response::new(schedule_to_pb(&schedule)))
    }

    async fn resume_schedule(
        &self,
        request: Request<pb::ResumeScheduleRequest>,
    ) -> Result<Response<pb::Schedule>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = request.into_inner().schedule_id;
        let schedule = self.pause(&caller, id, false).await?;
        Ok(Response::new(schedule_to_pb(&schedule)))
    }

    async fn delete_schedule(
        &self,
        request: Request<pb::DeleteScheduleRequest>,
    ) -> Result<Response<pb::DeleteScheduleResponse>, Status> {
        let (caller, _admitted) = self.admit(&request)?;
        let id = positive("schedule_id", request.into_inner().schedule_id)?;
        self.schedules
            .delete_if_owned(id, caller.scope())
            .await
            .map_err(status)?;
        info!(schedule.id = id, client = %caller.name, "schedule deleted");
        Ok(Response::new(pb::DeleteScheduleResponse {}))
    }
}

/// A schedule on the wire.
pub fn schedule_to_pb(s: &Schedule) -> pb::Schedule {
    let (interval, cron) = match &s.timing {
        Timing::Interval(d) => (Some(duration_to_pb(*d)), String::new()),
        Timing::Cron(c) => (None, c.clone()),
    };
    pb::Schedule {
        schedule_id: s.schedule_id,
        client: s.client.clone(),
        products: s.products.iter().map(pb::Product::from).collect(),
        malls: s.malls.iter().map(ToString::to_string).collect(),
        interval,
        cron,
        priority: u32::from(s.priority.get()),
        destinations: s.destinations.iter().map(ToString::to_string).collect(),
        rules: s.rules.iter().map(pb::PriceMoveRule::from).collect(),
        paused: s.paused,
        next_run_at: Some(timestamp_to_pb(s.next_run_at)),
        runs: s.runs,
        last_search_id: s.last_search_id.unwrap_or_default(),
        last_run_at: s.last_run_at.map(timestamp_to_pb),
        last_error: s.last_error.clone().unwrap_or_default(),
        created_at: Some(timestamp_to_pb(s.created_at)),
        updated_at: Some(timestamp_to_pb(s.updated_at)),
    }
}
