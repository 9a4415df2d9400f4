-- Usage keys of requests begin "req:" (store.RequestKey), apart from the
-- keys of messages without a request id ("msg:", "sha256:"): before, a
-- request's key was its id, "username:requestId", and a user named "msg"
-- shared the messages' key space. Rows counted under the old keys stay as
-- they are (the consumer also looks a request up by its old key), but for
-- the requests of a user named "req", whose old keys begin "req:" as the
-- new ones do: those take their new form here, so that an old key never
-- equals a new one. A key that would outgrow the column is left.

-- +goose Up
UPDATE agent_usage_event SET request_id = CONCAT('req:', request_id)
 WHERE request_id LIKE 'req:%' AND CHAR_LENGTH(request_id) <= 251;

-- +goose Down
-- The older build counts a request by its id alone.
UPDATE IGNORE agent_usage_event SET request_id = SUBSTRING(request_id, 5)
 WHERE request_id LIKE 'req:%';
