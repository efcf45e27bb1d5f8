class CreateTables < ActiveRecord::Migration[6.1]
  def change
    create_table :users do |t|
      t.string :email, limit: 100, null: false
      t.string :name, limit: 100
    end
    create_table :posts do |t|
      t.references :user, null: false, foreign_key: true, index: false
      t.string :title, limit: 200, null: false
      t.string :slug, limit: 200, null: false
      t.text :body
      t.integer :score, null: false, default: 0
    end
    create_table :comments do |t|
      t.references :post, null: false, foreign_key: true
      t.references :user, null: false, foreign_key: true
      t.text :body
    end
    # No foreign keys: its indexes take the plain online path.
    create_table :events do |t|
      t.string :kind, limit: 50, null: false
      t.integer :level, null: false
    end
  end
end
