class SeedRows < ActiveRecord::Migration[6.1]
  def up
    execute "INSERT INTO users (id, email, name) VALUES (1, 'ada@example.com', 'Ada'), (2, 'bob@example.com', 'Bob')"
    execute "INSERT INTO posts (id, user_id, title, slug, content, score) VALUES (1, 1, 'First', 'first', 'hello', 3), (2, 2, 'Second', 'second', 'world', 5)"
    execute "INSERT INTO comments (id, post_id, user_id, body) VALUES (1, 1, 2, 'nice'), (2, 2, 1, 'thanks')"
    execute "INSERT INTO events (id, kind, level) VALUES (1, 'signup', 1), (2, 'post', 2)"
  end

  def down
    execute "DELETE FROM events"
    execute "DELETE FROM comments"
    execute "DELETE FROM posts"
    execute "DELETE FROM users"
  end
end
