class IndexPostsScore < ActiveRecord::Migration[6.1]
  def change
    add_index :posts, :score, name: "posts_score_idx"
    add_index :events, :level, name: "events_level_idx"
  end
end
