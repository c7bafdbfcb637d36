-- no-transaction
-- LPS schema, part 15: the error class `config` (ErrorClass::Config, ERROR_CLASS_CONFIG).
--
-- The proxy gateway itself refused the mall's host (a CONNECT answered non-2xx, or a
-- forwarded request answered with an RFC 9209 `Proxy-Status` error): the deployment's
-- configuration is wrong, not the exit IP. Such an attempt is not retried and blames no
-- IP. See 0009 for why `add value` runs outside a transaction.
alter type error_class add value if not exists 'config';
