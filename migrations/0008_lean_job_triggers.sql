-- LPS schema, part 8: the job table's two row triggers do less on the queue's hot path.
--
-- * job_free_mall_slot fired for every job leaving `running`, also for malls without a
--   cap (a plpgsql call and an UPDATE of mall_slot that found nothing). A running job now
--   records the slot it holds (`slot_no`, set by every claim: the slot taken, or null),
--   and the trigger fires only when there is a slot to free. The column keeps the last
--   run's slot after the job left `running`; the trigger only reads it on that exit.
-- * job_touch took a new change number in plpgsql for every watched change. The claim and
--   completion statements now take it themselves (`change_seq = nextval(…)`), and the
--   trigger fires only when a statement changed a watched column without doing so, so
--   every other path still gets its number.

alter table job add column slot_no integer;

update job j set slot_no = s.slot_no
from mall_slot s
where s.job_id = j.job_id and j.state = 'running';

drop trigger job_free_mall_slot on job;
create trigger job_free_mall_slot after update of state on job
    for each row when (old.state = 'running' and new.state <> 'running' and old.slot_no is not null)
    execute function job_free_mall_slot();

drop trigger job_touch on job;
create trigger job_touch before update on job
    for each row when (
        old.change_seq = new.change_seq
        and (old.state is distinct from new.state
             or old.priority is distinct from new.priority
             or old.lease_epoch is distinct from new.lease_epoch
             or old.attempts is distinct from new.attempts)
    ) execute function job_touch();
