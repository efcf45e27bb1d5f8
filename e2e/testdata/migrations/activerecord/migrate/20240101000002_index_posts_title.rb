class IndexPostsTitle < ActiveRecord::Migration[6.1]
  def change
    add_index :posts, :title, name: "posts_title_idx"
    add_index :events, :kind, name: "events_kind_idx"
  end
end
