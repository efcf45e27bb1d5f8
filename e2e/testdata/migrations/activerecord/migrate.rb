# Applies every migration in migrate/, then rolls the last one back, against
# the database the environment names (the proxy or the backend).
require "active_record"

ActiveRecord::Base.establish_connection(
  adapter: "mysql2",
  host: ENV.fetch("DB_HOST"),
  port: Integer(ENV.fetch("DB_PORT")),
  username: ENV.fetch("DB_USER"),
  password: ENV.fetch("DB_PASSWORD"),
  database: ENV.fetch("DB_NAME"),
)
ActiveRecord::Migration.verbose = ENV["VERBOSE"] == "1"

context = ActiveRecord::MigrationContext.new(File.join(__dir__, "migrate"), ActiveRecord::SchemaMigration)
context.migrate
context.rollback(1)
